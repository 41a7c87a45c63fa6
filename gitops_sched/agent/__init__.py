"""The node agent: reads a node's GPUs through NVML (or a fake with real models' numbers),
publishes the inventory, creates and destroys MIG instances, maps GPU processes to pods,
enforces fraction memory shares and detects idle pods.

Modules by responsibility:
- `gpus`: the backend interface and the facts it returns (one small Protocol);
- `errors`: typed GPU errors the backends raise (NVML return codes mapped once, in `nvml`);
- `nvml`: the pynvml backend; `fake`: the in-memory backend built from `hardware/` tables;
- `inventory`: what is published on the node, and whether it changed;
- `cgroups`: PID -> pod UID through /proc/<pid>/cgroup;
- `fractions`: warn / evict decisions for fraction pods over their memory share;
- `idle`: per-pod utilisation over a window -> idle since;
- `table`, `main`: the `gitops-sched agent` command.

Everything except `nvml` and `main` is pure and needs no GPU, driver or cluster.
"""

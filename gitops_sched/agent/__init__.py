"""The node agent: reads a node's GPUs through NVML (or a fake with real models' numbers),
publishes the inventory, creates and destroys MIG instances, maps GPU processes to pods,
enforces fraction memory shares and detects idle pods.

Modules by responsibility:
- `gpus`: the backend interface and the facts it returns (one small Protocol);
- `errors`: typed GPU errors the backends raise (NVML return codes mapped once, in `nvml`);
- `nvml`: the pynvml backend; `fake`: the in-memory backend built from `hardware/` tables;
- `inventory`: what is published on the node, and whether it changed;
- `mig`: the scheduler's MIG request and the agent's answer; a GPU's plan and carrying it out;
- `cgroups`: PID -> pod UID through /proc/<pid>/cgroup;
- `pods`: what the agent reads from the pods bound to its node (shares, who is watched idle);
- `fractions`: warn / evict decisions for fraction pods over their memory share;
- `idle`: per-pod utilisation over a window -> idle since;
- `cluster`: the agent's reads and writes on the API server (printed under a dry run);
- `node`: one tick, feeding the decisions what the backend and the API report;
- `table`, `main`: the `gitops-sched agent` command.

Everything except `nvml`, `cluster`, `node` and `main` is pure and needs no GPU, driver or
cluster.
"""

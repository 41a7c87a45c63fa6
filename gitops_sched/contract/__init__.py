"""The wire contract: what one component writes on a live object and another reads back.

Standard library and `hardware` only, so every side imports it without loading the others:
the compiler writes the labels, pod annotations and the policy ConfigMap; the scheduler reads
them and writes placements and MIG requests; the node agent publishes its GPU inventory and
answers MIG requests. Each format has one encoder and one parser here.

- `labels`: the API group and version, the labels every rendered object carries.
- `pods`: the annotations on pods and nodes, and the placement annotation's JSON.
- `inventory`: the node agent's GPU inventory (`NODE_GPUS`).
- `mig`: the scheduler's MIG request (`NODE_MIG_REQUEST`) and the agent's answer.
- `policy`: the policy ConfigMap's name and the typed reading of its document.
"""

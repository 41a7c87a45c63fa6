"""The in-cluster scheduler: live pods and nodes -> the engine's Snapshot -> binds, evictions,
MIG requests, reservation pods and status written back to the cluster.

Modules: `view` (what a cycle sees), `snapshot` (live objects -> view), `actuate` (decisions
-> API calls), `status` (queue status and pending reasons), `loop` and `main` (the process).
"""

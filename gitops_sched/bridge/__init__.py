"""The one translation from the config model to the engine's input (queues, nodes, jobs,
policy), used by `simulate`, `plan` and the in-cluster scheduler alike."""

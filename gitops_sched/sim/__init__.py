"""The simulator: the scheduling engine run on a cluster built from the config repo.

`build` turns the config model into engine data, `events` reads a scripted Simulation
file, `run` drives the engine step by step, and `report` prints what happened. Only
`events` (reading the file) and the CLI touch the outside world.
"""

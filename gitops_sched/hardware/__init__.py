"""GPU models and NVIDIA's MIG tables: facts about hardware shared by config checks, the
engine, the simulator and the node agent. Depends on nothing else in the package."""

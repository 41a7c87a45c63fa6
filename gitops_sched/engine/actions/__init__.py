"""The steps of a cycle, in the order `cycle.schedule` runs them."""

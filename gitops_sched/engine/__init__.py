"""The scheduling engine: a pure function from a cluster snapshot to decisions."""

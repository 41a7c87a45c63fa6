"""What the tests and the benchmarks share: the real control plane they run the
in-cluster components against (`control_plane`), config document builders
(`config_builders`) and the reconciler's Git-repo harness (`reconciler_harness`)."""

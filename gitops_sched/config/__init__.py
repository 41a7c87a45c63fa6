"""Loading, checking and modelling a cluster config repo."""

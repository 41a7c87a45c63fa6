"""The in-cluster reconciler: keeps the objects the repo renders in the cluster, and only
those (see `sync` for one pass, `loop` for the process around it)."""

from gitops_sched.reconciler.loop import Outcome, Reconciler, Settings
from gitops_sched.reconciler.sync import OWNER_LABEL, Syncer, SyncResult

__all__ = ["OWNER_LABEL", "Outcome", "Reconciler", "Settings", "SyncResult", "Syncer"]

"""gitops-sched: GPU sharing for Kubernetes clusters, declared in Git."""

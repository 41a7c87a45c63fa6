"""A real Kubernetes control plane for the in-cluster tests, `make dev-cluster` and the
benchmarks: etcd, kube-apiserver, kube-controller-manager and kwok, built from their Go
modules by `hack/control-plane.sh` and run as local processes on 127.0.0.1.

- `binaries`: builds (or finds) the binaries.
- `cluster`: `ControlPlane`, which starts and stops them and hands out a client config.
- `nodes`: kwok GPU nodes as a real cluster shows them (GPU Feature Discovery's labels,
  the device plugin's allocatable), from a config repo's NodeGroups or given shapes.
- `migplugin`: the NVIDIA device plugin of a MIG node (its pod, restarted after the node
  agent deletes it, then advertising the node's MIG instances as the plugin and GFD do).
- `accounts`: namespaces pods can be made in; clients acting as a ServiceAccount.
- `kueue`: Kueue's controller manager beside it (`hack/kueue.sh`), its webhooks on 127.0.0.1.
- `waiting`: `wait(what, done, seconds)`, polling with a deadline.
"""

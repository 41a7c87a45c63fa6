"""Which pod a GPU process belongs to: PID -> /proc/<pid>/cgroup -> pod UID.

NVML reports host PIDs, so the agent runs in the host PID namespace and reads the host's
/proc. kubelet names a pod's cgroup after its UID, differently per cgroup driver:

- cgroupfs: `/kubepods/burstable/pod1b2c...-...-.../<container>` (`/kubepods/pod<uid>` for
  Guaranteed pods), on cgroup v1 (one line per controller) and v2 (`0::/kubepods/...`);
- systemd: `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c..._..._.slice/
  cri-containerd-<id>.scope`, the UID's dashes written as underscores;
- static (mirror) pods have a 32-hex-digit UID (the config hash) instead of a UUID.

A kubelet `--cgroup-root` (kind: `/kubelet.slice/kubelet-kubepods.slice/...`) only adds a
prefix. The parsing is pure; the /proc root is a parameter so tests need no processes.
"""

import re
from pathlib import Path

_UUID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD = re.compile(rf"(?:^|[/-])pod({_UUID}|[0-9a-f]{{32}})(?:\.slice)?(?=/|$)")


def pod_uid_from_cgroup(text: str) -> str | None:
    """The pod UID in a /proc/<pid>/cgroup file's text, or None for a process outside pods.

    Every line is `hierarchy-ID:controllers:path`; the first kubepods path wins (on cgroup
    v1 all controllers name the same pod).
    """
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if "kubepods" not in path:
            continue
        for segment_match in _POD.finditer(path):
            return segment_match.group(1).replace("_", "-")
    return None


def pod_uid_for_pid(pid: int, proc_root: Path = Path("/proc")) -> str | None:
    """The pod UID of a host PID, or None when the process is gone or not in a pod."""
    try:
        text = (proc_root / str(pid) / "cgroup").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return pod_uid_from_cgroup(text)

"""Kueue against `simulate` on the NetApp example: `render --target kueue` installed on the real
control plane (etcd, kube-apiserver, kube-controller-manager, kwok GPU nodes) with Kueue
v0.17's own controller manager running beside it, and per ClusterQueue the workloads Kueue
admits beside those `simulate` runs, after each change of the example's scenario: the repo's
workloads arrive, team-d claims its quota, team-d's work is deleted
(testkit/kueue_comparison.py; tests/test_kueue_admission.py asserts it).

Prints the comparison as Markdown tables, and the time Kueue took to start (its CRDs,
webhooks and certificates) and the whole run. Builds Kueue (`hack/kueue.sh`) and fetches its
CRDs (`hack/target-crds.sh kueue`) when they are not cached.

    .venv/bin/python benchmarks/kueue_netapp.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.control_plane import kueue
from testkit.kueue_comparison import compare, table
from testkit.target_crds import crd_folder, crds_or_skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="run in DIR and keep its logs (kueue/kueue.log)")
    args = parser.parse_args()
    subprocess.run(["bash", str(kueue.SCRIPT)], check=True)  # builds Kueue when missing
    crd_folder("kueue")  # fails loudly here, rather than as a test's skip
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        stages = compare(root / "plane", crds_or_skip("kueue"))
    print(table(stages))
    took = time.monotonic() - started
    print(f"whole run: {took:.1f}s (one control plane, {len(stages)} stages, a Job a second)")


if __name__ == "__main__":
    main()

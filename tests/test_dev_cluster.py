"""`make dev-cluster` runs from the README's plain install (`pip install -e .`, no test
extras): the control plane's launcher imports nothing of pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_dev_cluster_launcher_loads_without_pytest() -> None:
    code = "import sys; sys.modules['pytest'] = None; import testkit.control_plane.__main__"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr

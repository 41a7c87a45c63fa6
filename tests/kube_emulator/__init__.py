"""A Kubernetes API emulator for tests: the real client talks to it over HTTP.

See `api.py` for what it enforces and `server.py` for how to start one.
"""

from tests.kube_emulator.api import Api, ApiError, Fault
from tests.kube_emulator.server import KubeEmulator

__all__ = ["Api", "ApiError", "Fault", "KubeEmulator"]

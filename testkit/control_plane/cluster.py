"""`ControlPlane`: etcd, kube-apiserver, kube-controller-manager and kwok as local processes
on 127.0.0.1 (free ports, one data folder), the way envtest runs a control plane.

The API server authenticates a static admin token (group `system:masters`) and authorizes
with Node,RBAC; it writes an audit log (`audit.log`, one JSON event a line) of every request
a ServiceAccount makes, the RBAC roles it writes with their request body (see `audit`, which
reads it); the controller manager runs its default controllers (Jobs make pods,
Deployments make ReplicaSets and pods, namespaces are finalised, the garbage collector and
the disruption controller run); kwok plays every node's kubelet with `stages.yaml`. Every
process dies with the one that started it (PR_SET_PDEATHSIG), so a killed test run leaves
nothing behind.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from testkit.control_plane import binaries
from testkit.control_plane.audit import POLICY as AUDIT_POLICY

STAGES = Path(__file__).with_name("stages.yaml")
ADMIN = "gitops-sched-admin"
# Go's garbage collector at a quarter of its default frequency: a test cluster holds little,
# and collecting was a seventh of the API server's CPU in the suite (memory is cheap here)
GOGC = os.environ.get("GOGC", "400")
# the admin token (`system:masters`) of every control plane started in this process
ADMIN_TOKENS: set[str] = set()


class StartFailed(RuntimeError):
    """A component did not come up; the message holds the end of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def end(process: subprocess.Popen[bytes], grace: float = 10) -> None:
    """Stop a process the tests started: SIGTERM, then SIGKILL if it has not ended within
    `grace` seconds (a process stuck in its shutdown must not hang the suite)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ControlPlane:
    """Start with `start()` (or `with ControlPlane(folder) as cp:`), stop with `stop()`."""

    def __init__(self, root: Path, *, die_with_parent: bool = True):
        self.root = root
        self.die_with_parent = die_with_parent
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.token = ""
        self.api_port = 0
        self.version = ""
        # the folders of the product's manifests installed as the session's baseline holds
        # them (`installed.py`): `apply_kustomization` of one sends nothing
        self.installed: set[str] = set()

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until the cluster makes pods and nodes are Ready."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        try:
            self._certificates()
            self.token = secrets.token_hex(16)
            ADMIN_TOKENS.add(self.token)
            (self.root / "tokens.csv").write_text(f"{self.token},{ADMIN},{ADMIN},system:masters\n")
            self._etcd()
            self._apiserver()
            self._write_kubeconfig()
            self._controller_manager()
            self._kwok()
            self._wait("the default ServiceAccount", self._has_default_service_account, 60)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the components, the last started first. Each gets 2 s: kube-apiserver's
        graceful shutdown otherwise waits out the 10 s for a watch some test's client left
        open, at the end of every worker's run, and nothing here needs its data kept."""
        for name in reversed(list(self.processes)):
            end(self.processes.pop(name), grace=2)

    def remove(self) -> None:
        """Stop and delete the data folder."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def configuration(self) -> client.Configuration:
        """A client configuration for the admin token."""
        c = client.Configuration()
        c.host = self.server
        c.ssl_ca_cert = str(self.root / "ca.crt")
        c.api_key = {"authorization": f"Bearer {self.token}"}
        return c

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration())

    # -- components -----------------------------------------------------------------

    def _certificates(self) -> None:
        """A CA, the API server's serving certificate for 127.0.0.1, and the service
        account signing key pair."""
        d = self.root

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

        openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "30",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=gitops-sched-test-ca",
        )
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=kube-apiserver",
        )
        (d / "san.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
        )
        openssl(
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-out",
            "server.crt",
            "-extfile",
            "san.ext",
        )
        openssl("genrsa", "-out", "sa.key", "2048")
        openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / "logs" / f"{name}.log", "ab")  # noqa: SIM115 (the child owns it)
        self.processes[name] = subprocess.Popen(
            [binaries.path(name), *args],
            env={**os.environ, "GOGC": GOGC},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent if self.die_with_parent else None,
        )
        log.close()

    def _etcd(self) -> None:
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: self._get(f"{self.etcd_url}/health", tls=False), 30)

    def _apiserver(self) -> None:
        d = self.root
        self.api_port = free_port()
        (d / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--cert-dir={d / 'apiserver'}",
                f"--tls-cert-file={d / 'server.crt'}",
                f"--tls-private-key-file={d / 'server.key'}",
                f"--client-ca-file={d / 'ca.crt'}",
                f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--enable-priority-and-fairness=false",
                "--allow-privileged=true",
                f"--audit-policy-file={d / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking",  # an event is on disk before its answer is sent
            ],
        )
        self._wait("kube-apiserver", lambda: self._get(f"{self.server}/readyz"), 90)
        self.version = json.loads(self._get(f"{self.server}/version") or "{}").get("gitVersion", "")

    def _write_kubeconfig(self) -> None:
        ca = base64.b64encode((self.root / "ca.crt").read_bytes()).decode()
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": ADMIN, "user": {"token": self.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": ADMIN}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def _controller_manager(self) -> None:
        d = self.root
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                f"--service-account-private-key-file={d / 'sa.key'}",
                f"--root-ca-file={d / 'ca.crt'}",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--concurrent-job-syncs=20",
            ],
        )

    def _kwok(self) -> None:
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig}",
                "--manage-all-nodes=true",
                f"--server-address=127.0.0.1:{free_port()}",
                "--node-ip=10.240.0.1",
                "--cidr=10.244.0.0/16",
                f"--config={STAGES}",
            ],
        )

    # -- waiting ----------------------------------------------------------------------

    def _get(self, url: str, tls: bool = True) -> str | None:
        request = urllib.request.Request(url)
        context = None
        if tls:
            request.add_header("Authorization", f"Bearer {self.token}")
            context = ssl.create_default_context(cafile=str(self.root / "ca.crt"))
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as answer:
                return str(answer.read().decode())
        except (urllib.error.URLError, OSError):
            return None

    def _has_default_service_account(self) -> bool:
        url = f"{self.server}/api/v1/namespaces/default/serviceaccounts/default"
        return self._get(url) is not None

    def _wait(self, what: str, ready: Any, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise StartFailed(f"{name} exited ({process.returncode}):\n{self.log(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise StartFailed(
            f"{what} not ready after {seconds:.0f}s:\n"
            + "\n".join(f"--- {name}\n{self.log(name)}" for name in self.processes)
        )

    def log(self, name: str, tail: int = 3000) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

"""Kueue's controller manager on the test control plane, as a host process beside it, with its
webhooks served on 127.0.0.1 and called by kube-apiserver: no cert-manager, no kubelet, no
Service network.

How the webhooks are reached without a pod network:
- Kueue manages its own certificates (`internalCertManagement`): its cert rotator signs a
  serving certificate for `kueue-webhook-service.kueue-system.svc` into the Secret
  `kueue-webhook-server-cert` and puts its CA into the webhook configurations and the CRDs'
  conversion webhooks. Here the Secret's certificate is copied to the manager's `certDir`
  (what the kubelet's secret volume does in a pod).
- The Service `kueue-webhook-service` is an `ExternalName` service naming `127.0.0.1`:
  kube-apiserver resolves a webhook's service reference through it to 127.0.0.1 and the
  webhook port, and checks the certificate against the service's DNS name, which the
  rotator's certificate carries. No kube-proxy is needed.

Turning Kueue's internal certificates off instead needs a metrics certificate at the fixed
path /etc/kueue/metrics/certs (Kueue 0.17's main reads it unconditionally then), outside any
test folder.

The webhook configurations are Kueue's own (`config/components/webhook/manifests.yaml`,
cached by `hack/kueue.sh`), as its kustomize build names them, kept to the kinds this
manager handles (Kueue's and batch Jobs: the one integration enabled); the CRDs whose
conversion the rotator manages get Kueue's conversion webhook patch.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from gitops_sched.cluster import ClusterClient
from testkit.control_plane.cluster import ControlPlane, StartFailed, die_with_parent, end, free_port
from testkit.control_plane.install import apply_rendered, kubectl, wait_established
from testkit.control_plane.waiting import wait

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "kueue.sh"
NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
API = "kueue.x-k8s.io"
# the CRDs Kueue 0.17's cert rotator injects its CA into (pkg/util/cert): a conversion
# webhook on another CRD would have no CA
CONVERTED = ("clusterqueues", "cohorts", "localqueues", "multikueueclusters", "workloads")
# the API groups of the webhooks installed: Kueue's own kinds and the Job integration
GROUPS = {"kueue.x-k8s.io", "batch"}
GPU = "nvidia.com/gpu"
# what Kueue adds to a workload's reason while the preemption it asked for is under way
PREEMPTING = "Pending the preemption"


class NotBuilt(RuntimeError):
    """Kueue's controller is not in the cache: `hack/kueue.sh` (`make kueue`) builds it."""


@functools.cache
def folder() -> Path:
    """The cache folder with `bin/kueue` and `webhook/`, as `hack/kueue.sh` built it; it
    builds nothing here (minutes of Go on first use)."""
    done = subprocess.run(["bash", str(SCRIPT), "--cached"], capture_output=True, text=True)
    if done.returncode != 0:
        raise NotBuilt(done.stderr.strip())
    return Path(done.stdout.strip().splitlines()[-1])


class Kueue:
    """Kueue's manager on `plane`: `start()` installs its namespace, Service, Secret, CRDs
    (`crds`, from `hack/target-crds.sh kueue`) and webhook configurations, runs it and waits
    until kube-apiserver gets answers from its webhooks; `stop()` ends it."""

    def __init__(self, plane: ControlPlane, crds: list[dict[str, Any]]):
        self.plane = plane
        self.crds = crds
        self.root = plane.root / "kueue"
        self.process: subprocess.Popen[bytes] | None = None
        self.webhook_port = free_port()
        self.health_port = free_port()

    @property
    def log_path(self) -> Path:
        return self.root / "kueue.log"

    def log(self, tail: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:] if self.log_path.exists() else ""

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "certs").mkdir(exist_ok=True)
        self._install()
        config = self.root / "config.yaml"
        config.write_text(yaml.safe_dump(self._configuration()))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(folder() / "bin" / "kueue"),
                    f"--config={config}",
                    f"--kubeconfig={self.plane.kubeconfig}",
                    "--zap-log-level=2",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,  # a killed test run leaves no manager behind
            )
        try:
            self._mount_certificate()
            wait("Kueue's readiness", self._ready, 120, every=0.2)
            wait("Kueue's webhooks answering kube-apiserver", self._webhooks_answer, 60, 0.2)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process is not None:
            end(self.process)
            self.process = None

    # -- installing -------------------------------------------------------------------

    def _install(self) -> None:
        webhooks = folder() / "webhook"
        service = {"name": SERVICE, "namespace": NAMESPACE, "port": self.webhook_port}
        crds = [_with_conversion(c, webhooks, service) for c in self.crds]
        objects: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": NAMESPACE},
                "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
            },
            {  # empty: the rotator fills it
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SECRET, "namespace": NAMESPACE},
            },
            *crds,
            *_webhook_configurations(webhooks / "manifests.yaml", service),
        ]
        apply_rendered(self.plane, objects)
        wait_established(self.plane, crds)

    def _configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.root / "certs"),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {
                "enable": True,
                "webhookServiceName": SERVICE,
                "webhookSecretName": SECRET,
            },
            "integrations": {"frameworks": ["batch/job"]},
            # the render sets fair-sharing weights; Kueue reads them with fair sharing on
            "fairSharing": {
                "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
            },
            # its aggregated API would need an APIService kube-apiserver cannot reach either
            "featureGates": {"VisibilityOnDemand": False},
        }

    # -- waiting ----------------------------------------------------------------------

    def _alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise StartFailed(f"kueue exited ({self.process.returncode}):\n{self.log()}")

    def _mount_certificate(self) -> None:
        """Copy the rotator's serving certificate to `certDir`, as a secret volume would."""
        core = client.CoreV1Api(self.plane.api_client())

        def signed() -> dict[str, str] | None:
            self._alive()
            data = core.read_namespaced_secret(SECRET, NAMESPACE).data or {}
            return data if {"tls.crt", "tls.key"} <= set(data) else None

        try:
            data = wait("Kueue's cert rotator filling its Secret", signed, 60, every=0.1)
        finally:
            core.api_client.close()
        for name in ("tls.crt", "tls.key", "ca.crt"):
            (self.root / "certs" / name).write_bytes(base64.b64decode(data[name]))

    def _ready(self) -> bool:
        self._alive()
        return self.plane._get(f"http://127.0.0.1:{self.health_port}/readyz", tls=False) == "ok"

    def _webhooks_answer(self) -> bool:
        """A server-side dry run of an unsuspended Job naming a queue comes back suspended:
        kube-apiserver called Kueue's Job webhook, through the ExternalName Service, over
        TLS with the rotator's certificate."""
        self._alive()
        container = {"name": "probe", "image": "busybox"}
        probe = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "kueue-webhook-probe",
                "namespace": "default",
                "labels": {"kueue.x-k8s.io/queue-name": "probe"},
            },
            "spec": {
                "suspend": False,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        }
        try:
            answer = kubectl(
                self.plane,
                "create",
                "--dry-run=server",
                "-o",
                "json",
                "-f",
                "-",
                stdin=json.dumps(probe),
            )
        except AssertionError:  # the webhook does not answer yet: failurePolicy Fail
            return False
        return bool(json.loads(answer)["spec"]["suspend"])


def _with_conversion(
    crd: dict[str, Any], webhooks: Path, service: dict[str, Any]
) -> dict[str, Any]:
    """The CRD with Kueue's conversion webhook patch, where the rotator injects its CA."""
    plural = crd["spec"]["names"]["plural"]
    patch = webhooks / f"webhook_in_{plural}.yaml"
    if plural not in CONVERTED or not patch.exists():
        return crd
    conversion = yaml.safe_load(patch.read_text())["spec"]["conversion"]
    conversion["webhook"]["clientConfig"]["service"] |= service
    return {**crd, "spec": {**crd["spec"], "conversion": conversion}}


def _webhook_configurations(manifests: Path, service: dict[str, Any]) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, named as its install names them
    (`kueue-{mutating,validating}-webhook-configuration`, where the rotator looks), calling
    `service`, limited to the groups in `GROUPS`."""
    configurations = []
    for obj in yaml.safe_load_all(manifests.read_text()):
        if not obj:
            continue
        hooks = [
            {
                **h,
                "clientConfig": {
                    **h["clientConfig"],
                    "service": {**h["clientConfig"]["service"], **service},
                },
            }
            for h in obj["webhooks"]
            if {g for r in h["rules"] for g in r["apiGroups"]} <= GROUPS
        ]
        name = f"kueue-{obj['metadata']['name']}"
        configurations.append({**obj, "metadata": {"name": name}, "webhooks": hooks})
    return configurations


def workloads(client: ClusterClient) -> dict[str, dict[str, Any]]:
    """Kueue's Workloads by their Job (`namespace/name`): `queue` the ClusterQueue it is
    admitted to (None while pending), `gpus` the nvidia.com/gpu its admission reserves,
    `decided` whether Kueue is done with it for now (admitted and its Job started, or
    refused with a reason and its Job suspended; not while a preemption it asked for or
    suffers is under way), `why` it is pending (the preemption that evicted it, else the
    reason Kueue gives). Read with the admin's `client`: two lists a look (a `kubectl get`
    a look cost a process start and its discovery, several times the lists themselves)."""
    items = client.list(f"{API}/v1beta2", "Workload") or []
    listed = client.list("batch/v1", "Job") or []
    suspended = {
        f"{j['metadata']['namespace']}/{j['metadata']['name']}": j["spec"].get("suspend", False)
        for j in listed
    }
    versions = {
        f"{j['metadata']['namespace']}/{j['metadata']['name']}": j["metadata"]["resourceVersion"]
        for j in listed
    }
    found = {}
    for w in items:
        status = w.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions", [])}

        true = {kind for kind, c in conditions.items() if c.get("status") == "True"}
        reserved = conditions.get("QuotaReserved", {})
        refused = reserved.get("status") == "False" and PREEMPTING not in reserved["message"]
        admitted = "Admitted" in true and "Evicted" not in true
        assignments = (status.get("admission") or {}).get("podSetAssignments", [])
        preempted = conditions.get("Preempted", {})
        owner = next(iter(w["metadata"].get("ownerReferences", [])), {})
        job = f"{w['metadata']['namespace']}/{owner.get('name', w['metadata']['name'])}"
        found[job] = {
            "queue": status["admission"]["clusterQueue"] if admitted else None,
            "gpus": sum(float(a.get("resourceUsage", {}).get(GPU, 0)) for a in assignments),
            "decided": (admitted or refused) and suspended.get(job) is (not admitted),
            "version": (w["metadata"]["resourceVersion"], versions.get(job)),
            "why": (
                f"preempted ({preempted['reason']})"
                if "Preempted" in true
                else reserved.get("message", "")
            ),
        }
    return found


def settled(
    client: ClusterClient, jobs: int, quiet: float = 2.0, seconds: float = 60
) -> dict[str, dict[str, Any]]:
    """`workloads` once every one of the `jobs` Jobs has its Workload, Kueue has decided
    each (admitted and its Job unsuspended, or left pending with its reason and its Job
    suspended), and none of them has changed for `quiet` seconds: after a change, the
    decisions of the state before it still read as decided until Kueue gets to them."""
    last: dict[str, Any] = {"versions": None, "since": 0.0}

    def done() -> dict[str, dict[str, Any]] | None:
        found = workloads(client)
        versions = {job: w["version"] for job, w in found.items()}
        if versions != last["versions"]:
            last.update(versions=versions, since=time.monotonic())
        complete = len(found) == jobs and all(w["decided"] for w in found.values())
        return found if complete and time.monotonic() - last["since"] >= quiet else None

    return wait(f"Kueue deciding {jobs} workloads", done, seconds, every=0.2)


def wait_active(client: ClusterClient, queues: list[dict[str, Any]], seconds: float = 60) -> None:
    """Until Kueue reports every ClusterQueue and LocalQueue of `queues` Active: a workload
    that arrives before its queue is would wait, and be admitted with those after it."""
    kinds = sorted({(q["apiVersion"], q["kind"]) for q in queues})
    wanted = {(q["kind"], q["metadata"]["name"]) for q in queues}

    def active() -> bool:
        items = [i for kind in kinds for i in client.list(*kind) or ()]
        return wanted <= {
            (i["kind"], i["metadata"]["name"])
            for i in items
            if any(
                c["type"] == "Active" and c["status"] == "True"
                for c in (i.get("status") or {}).get("conditions", [])
            )
        }

    wait("Kueue's queues Active", active, seconds, every=0.2)

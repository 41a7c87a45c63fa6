"""`gitops-sched agent`: the dry run prints the node's inventory; without a driver it says so;
with a kubeconfig it publishes (or, dry, prints what it would write), here to a kwok node of
the real control plane."""

import io
import json

import pynvml
import pytest
from click.testing import CliRunner
from rich.console import Console

from gitops_sched.agent.cluster import GPU_OPERATOR
from gitops_sched.agent.main import run_agent
from gitops_sched.cli import main
from gitops_sched.cluster import ObjectRef
from gitops_sched.contract.pods import NODE_GPUS
from testkit.control_plane.accounts import AGENT, account_kubeconfig, install_agent, make_namespace
from testkit.control_plane.nodes import gpu_node


def run(*args):
    return CliRunner().invoke(main, ["agent", *args])


def test_once_dry_run_with_fake_gpus_prints_the_inventory_table():
    result = run("--once", "--dry-run", "--node", "gpu-7", "--fake", "A100-80GB:1:mig,V100-32GB:2")
    assert result.exit_code == 0, result.output
    assert "node gpu-7: 3 GPUs" in result.output
    for text in ("A100-SXM4-80GB", "V100-SXM2-32GB", "81920 MiB", "enabled", "unsupported"):
        assert text in result.output


def test_no_nvidia_driver_is_one_line_and_exit_1(monkeypatch):
    def no_library():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    result = run("--once", "--dry-run")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert "no NVIDIA driver" in result.output and "--fake" in result.output


def test_publishing_without_a_cluster_configuration_is_a_usage_error(monkeypatch, tmp_path):
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    result = run("--once", "--fake", "A10:1")
    assert result.exit_code == 2
    assert "no cluster configuration" in result.output and result.output.count("\n") == 1


@pytest.fixture
def cluster(real_cluster, real_client):
    """The real control plane with kwok node gpu-7 (two L40S) and the agent's shipped
    manifests (`kubectl apply -k scheduler/agent/`); a client and the path of a kubeconfig of
    the agent's ServiceAccount, as its DaemonSet's pods run."""
    make_namespace(real_client, GPU_OPERATOR.namespace)  # its device plugin Role's
    install_agent(real_cluster)
    real_client.create(gpu_node("gpu-7", "L40S", 2))
    return real_client, str(account_kubeconfig(real_cluster, *AGENT))


def annotations(client):
    node = client.get(ObjectRef("v1", "Node", "", "gpu-7"))
    return node["metadata"].get("annotations") or {}


def test_once_publishes_the_nodes_inventory_through_the_kubeconfig(cluster):
    client, kubeconfig = cluster
    result = run("--once", "--kubeconfig", kubeconfig, "--node", "gpu-7", "--fake", "L40S:2")
    assert result.exit_code == 0, result.output
    published = json.loads(annotations(client)[NODE_GPUS])
    assert [gpu["model"] for gpu in published["gpus"]] == ["L40S", "L40S"]
    assert f"annotate node/gpu-7 {NODE_GPUS}=" in result.output
    assert "node gpu-7: 2 GPUs" in result.output


def test_a_dry_run_with_a_cluster_prints_the_writes_it_would_make_and_makes_none(cluster):
    client, kubeconfig = cluster
    result = run(
        "--once", "--dry-run", "--kubeconfig", kubeconfig, "--node", "gpu-7", "--fake", "L40S:1"
    )
    assert result.exit_code == 0, result.output
    assert f"would annotate node/gpu-7 {NODE_GPUS}=" in result.output
    assert NODE_GPUS not in annotations(client)


def test_a_bad_duration_is_a_usage_error():
    result = run("--once", "--dry-run", "--fake", "L40S:1", "--grace", "soon")
    assert result.exit_code == 2 and "'soon' is not a duration" in result.output


def test_an_unknown_fake_model_is_a_usage_error():
    result = run("--once", "--dry-run", "--fake", "B200:1")
    assert result.exit_code == 2 and "unknown GPU model 'B200'" in result.output


def test_without_once_the_dry_run_prints_again_only_when_the_inventory_changes():
    console = Console(record=True, width=160)
    ticks = []

    def sleep(seconds):
        ticks.append(seconds)
        if len(ticks) == 3:
            raise KeyboardInterrupt

    code = run_agent(
        node="n", once=False, dry_run=True, fake="L40S:1", console=console, sleep=sleep
    )
    assert code == 0 and len(ticks) == 3
    assert console.export_text().count("node n: 1 GPU") == 1


def test_the_agent_serves_its_probes_and_metrics(monkeypatch):
    """What the DaemonSet's probes ask: alive while it ticks, ready once a tick read the GPUs."""
    served = {}

    def fake_serve(registry, health, host, port):
        served.update(registry=registry, health=health, where=(host, port))

    monkeypatch.setattr("gitops_sched.agent.main.serve", fake_serve)
    ticks = []

    def sleep(_: float) -> None:
        ticks.append(served["health"].ready)
        if len(ticks) == 2:
            raise KeyboardInterrupt  # how the loop ends on SIGINT

    code = run_agent(
        node="gpu-1",
        once=False,
        dry_run=True,
        fake="L40S:2",
        listen=":9100",
        sleep=sleep,
        console=Console(width=120, file=io.StringIO()),
    )
    assert code == 0
    assert served["where"] == ("0.0.0.0", 9100)
    assert ticks == [True, True] and served["health"].alive
    registry = served["registry"]
    assert registry.get_sample_value("gitops_sched_agent_gpus") == 2
    assert registry.get_sample_value("gitops_sched_agent_ticks_total", {"outcome": "ok"}) == 2

"""`gitops-sched agent`: open a GPU backend and the cluster, run the node agent's ticks.

Without `--dry-run` it publishes to the cluster (see `node.py` for what a tick does). With
`--dry-run` it changes nothing: it prints the node's inventory as a table (again whenever it
changes) and, when a cluster is configured (`--kubeconfig`, `KUBECONFIG`, or in a pod), one
line for each write it would make; without one it needs no cluster at all.
"""

import importlib
import os
import socket
import time
from collections.abc import Callable

import click
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import SERVICE_HOST_ENV_NAME as SERVICE_HOST_ENV
from prometheus_client import CollectorRegistry, Counter, Gauge
from rich.console import Console

from gitops_sched.agent.cluster import COMPONENT, GPU_OPERATOR, DevicePlugin, NodeApi
from gitops_sched.agent.errors import GpuError, NvmlUnavailable
from gitops_sched.agent.fake import FakeBackend, parse_fake_spec
from gitops_sched.agent.gpus import GpuBackend
from gitops_sched.agent.inventory import node_inventory
from gitops_sched.agent.node import DEFAULT_POLICY, AgentPolicy, NodeAgent
from gitops_sched.agent.table import print_inventory
from gitops_sched.cluster import ApiFailure, ClusterClient, load_configuration
from gitops_sched.cluster.serving import Health, serve
from gitops_sched.console import output_console
from gitops_sched.contract.inventory import inventory_changed

EXIT_NO_GPU = EXIT_FAILED = 1
EXIT_USAGE = 2


def open_backend(fake: str | None, node: str) -> GpuBackend:
    """The fake backend for `--fake`, else NVML (NvmlUnavailable without a driver)."""
    if fake:
        return FakeBackend(parse_fake_spec(fake), node=node)
    # NVML's bindings are the optional `agent` extra: loaded by name, only here, so the agent
    # with --fake runs without them (ModuleNotFoundError names pynvml when they are missing)
    nvml = importlib.import_module("gitops_sched.agent.nvml")
    return nvml.NvmlBackend()


def cluster_configured(kubeconfig: str | None) -> bool:
    """Whether a dry run should read the cluster: a kubeconfig given, or running in a pod."""
    return bool(kubeconfig or os.environ.get("KUBECONFIG") or os.environ.get(SERVICE_HOST_ENV))


def connect(kubeconfig: str | None) -> ClusterClient:
    """The cluster client (ConfigException when no configuration is found)."""
    return ClusterClient(load_configuration(kubeconfig), user_agent=COMPONENT)


class Probes:
    """`/healthz` (the loop ticks), `/readyz` (a tick has succeeded) and `/metrics` (ticks by
    outcome, GPUs seen) for the DaemonSet's probes and Prometheus."""

    def __init__(self, interval: float):
        self.health = Health(stale_after=max(60.0, interval * 5))
        self.registry = CollectorRegistry()
        self.ticks = Counter(
            "gitops_sched_agent_ticks",
            "Agent rounds by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.gpus = Gauge("gitops_sched_agent_gpus", "GPUs on this node.", registry=self.registry)

    def serve(self, listen: str) -> None:
        host, _, port = listen.rpartition(":")
        serve(self.registry, self.health, host or "0.0.0.0", int(port))

    def ticked(self, outcome: str, gpus: int | None = None) -> None:
        self.ticks.labels(outcome=outcome).inc()
        if gpus is not None:
            self.gpus.set(gpus)
            self.health.ready = True


def run_agent(
    *,
    node: str | None,
    once: bool,
    dry_run: bool,
    fake: str | None,
    kubeconfig: str | None = None,
    interval: float = 10.0,
    policy: AgentPolicy = DEFAULT_POLICY,
    device_plugin: DevicePlugin = GPU_OPERATOR,
    console: Console | None = None,
    sleep: Callable[[float], None] = time.sleep,
    listen: str = "",
) -> int:
    """Run the agent; the exit code (0; 1 no NVIDIA driver, or a failure with --once; 2 usage)."""
    node = node or os.environ.get("NODE_NAME") or socket.gethostname()
    if console is None:
        console = output_console()
    try:
        backend = open_backend(fake, node)
    except ValueError as exc:
        click.echo(f"agent: --fake: {exc}", err=True)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:  # nvidia-ml-py is the `agent` extra
        if exc.name != "pynvml":
            raise
        click.echo(
            "agent: the NVML bindings are not installed: pip install 'gitops-sched[agent]' "
            "(or use --fake MODEL:COUNT to run without GPUs)",
            err=True,
        )
        return EXIT_NO_GPU
    except NvmlUnavailable as exc:
        click.echo(
            f"agent: no NVIDIA driver or NVML library on this machine ({exc.code}); "
            "use --fake MODEL:COUNT to run without GPUs",
            err=True,
        )
        return EXIT_NO_GPU
    client: ClusterClient | None = None
    agent: NodeAgent | None = None
    try:
        if not dry_run or cluster_configured(kubeconfig):
            try:
                client = connect(kubeconfig)
            except ConfigException as exc:
                click.echo(
                    f"agent: no cluster configuration ({exc}); give --kubeconfig, or run in a pod",
                    err=True,
                )
                return EXIT_USAGE
            api = NodeApi(
                client, node, dry_run=dry_run, say=click.echo, device_plugin=device_plugin
            )
            agent = NodeAgent(backend, api, policy)
        shown = None
        probes = Probes(interval)
        if listen and not once:
            probes.serve(listen)
        while True:
            probes.health.beat()
            try:
                gpus = agent.tick() if agent else backend.gpus()
            except ApiFailure as exc:
                click.echo(f"agent: the API server: {exc}", err=True)
                probes.ticked("api-error")
                if once:
                    return EXIT_FAILED
            except GpuError:
                raise  # the GPUs themselves fail: said and exit, as at start
            except Exception as exc:  # a bug or a client failure: the next tick starts afresh
                click.echo(f"agent: tick failed: {type(exc).__name__}: {exc}", err=True)
                probes.ticked("error")
                if once:
                    return EXIT_FAILED
            else:
                probes.ticked("ok", len(gpus))
                inventory = node_inventory(gpus)
                if inventory_changed(shown, inventory):
                    print_inventory(node, inventory, console)
                    shown = inventory
            if once:
                return 0
            sleep(interval)
    except GpuError as exc:
        click.echo(f"agent: {exc}", err=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 0
    finally:
        backend.close()
        if client is not None:
            client.close()

"""`gitops-sched agent`: open a GPU backend, build the node's inventory, show or publish it.

For now only the dry run works: `--once --dry-run` prints the inventory once, `--dry-run`
alone prints it again whenever it changes. Publishing to the cluster (node annotation, MIG
requests, fraction enforcement, idle reports) needs the cluster client and says so.
"""

import os
import socket
import time
from collections.abc import Callable

import click
from rich.console import Console

from gitops_sched.agent.errors import GpuError, NvmlUnavailable
from gitops_sched.agent.fake import FakeBackend, parse_fake_spec
from gitops_sched.agent.gpus import GpuBackend
from gitops_sched.agent.inventory import inventory_changed, node_inventory
from gitops_sched.agent.table import print_inventory

EXIT_NO_GPU = 1
EXIT_USAGE = 2


def open_backend(fake: str | None, node: str) -> GpuBackend:
    """The fake backend for `--fake`, else NVML (NvmlUnavailable without a driver)."""
    if fake:
        return FakeBackend(parse_fake_spec(fake), node=node)
    from gitops_sched.agent.nvml import NvmlBackend

    return NvmlBackend()


def run_agent(
    *,
    node: str | None,
    once: bool,
    dry_run: bool,
    fake: str | None,
    interval: float = 10.0,
    console: Console | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run the agent; the exit code (0, 1 no NVIDIA driver, 2 usage / not built yet)."""
    if not dry_run:
        click.echo(
            "agent: publishing to the cluster is not built yet; use --once --dry-run", err=True
        )
        return EXIT_USAGE
    node = node or os.environ.get("NODE_NAME") or socket.gethostname()
    if console is None:
        # piped output (logs, CI) gets a wide fixed width so UUIDs are not cut
        console = Console()
        console = console if console.is_terminal else Console(width=160)
    try:
        backend = open_backend(fake, node)
    except ValueError as exc:
        click.echo(f"agent: --fake: {exc}", err=True)
        return EXIT_USAGE
    except NvmlUnavailable as exc:
        click.echo(
            f"agent: no NVIDIA driver or NVML library on this machine ({exc.code}); "
            "use --fake MODEL:COUNT to run without GPUs",
            err=True,
        )
        return EXIT_NO_GPU
    try:
        shown = None
        while True:
            inventory = node_inventory(backend.gpus())
            if inventory_changed(shown, inventory):
                print_inventory(node, inventory, console)
                shown = inventory
            if once:
                return 0
            sleep(interval)
    except GpuError as exc:
        click.echo(f"agent: {exc}", err=True)
        return EXIT_NO_GPU
    except KeyboardInterrupt:
        return 0
    finally:
        backend.close()

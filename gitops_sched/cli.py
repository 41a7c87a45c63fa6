"""The `gitops-sched` command line.

Exit codes: 0 success, 1 invalid config (or an unmet simulation expectation),
2 usage error (click's own code for bad options and missing paths).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gitops_sched.config.diagnostics import Diagnostics, format_diagnostics, printable

# Each command imports what it needs when it runs: `--version`, `--help` and shell
# completion load click alone, not the config stack (YAML, JSON Schema, Jinja2).
if TYPE_CHECKING:
    from gitops_sched.config.model import Repo
    from gitops_sched.sim.events import Simulation

EXIT_INVALID = 1
EXIT_USAGE = 2

# the config repo is a folder: a file given instead is a usage error (exit 2)
repo_path = click.argument(
    "path", type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path)
)


def _patterns(_ctx: click.Context, _param: click.Parameter, excludes: tuple[str, ...]) -> tuple:
    """The --exclude patterns, each checked here: a malformed one is a usage error, named
    as given, not a problem of the repo's ignore file."""
    from gitops_sched.config.ignore import BadPattern, IgnoreRules

    try:
        for pattern in excludes:
            IgnoreRules.of("", (pattern,))
        IgnoreRules.of("", excludes)  # and their bounds together (how many, how long)
    except BadPattern as exc:
        raise click.BadParameter(str(exc).removeprefix("--exclude ")) from None
    return excludes


exclude_option = click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="GLOB",
    callback=_patterns,
    help="Leave out matching files (gitignore syntax, added to the repo's .gitops-schedignore); "
    "repeatable.",
)


target_option = click.option(
    "--target",
    type=click.Choice(["gitops-sched", "kai", "kueue"]),
    default="gitops-sched",
    show_default=True,
    help="The scheduler to compile for: ours, NVIDIA KAI Scheduler, or Kueue.",
)


def _print_diagnostics(diagnostics: Diagnostics, fmt: str = "text") -> None:
    text = format_diagnostics(diagnostics.sorted(), fmt)
    if text:
        click.echo(text, nl=False, err=fmt == "text")


def load_or_exit(path: Path, excludes: tuple[str, ...] = ()) -> Repo:
    """The repo's model, or its diagnostics on stderr and exit 1."""
    from gitops_sched.validate import check_repo

    repo, diagnostics = check_repo(path, excludes)
    _print_diagnostics(diagnostics)
    if repo is None:
        sys.exit(EXIT_INVALID)
    return repo


class _Commands(click.Group):
    """The commands, with one rule for a file or output that fails them: a full disk or a
    closed pipe behind standard output, or a file that cannot be read or written, is one
    line (none for a reader that stopped early, as `| head` does) and exit 2, never a
    traceback, as is running out of memory; a template that fails to render after
    validation passed (past the time budget) is one line and exit 1."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                why = exc.strerror or exc
                where = exc.filename or "cannot write the output"
                click.echo(printable(f"gitops-sched: {where}: {why}"), err=True)
            _discard_stdout()
            sys.exit(EXIT_USAGE)
        except MemoryError:
            # a cluster at the schema's maxima (100,000 nodes of 64 GPUs) simulated on a
            # small machine, or under a memory limit: one line, not a traceback
            _discard_stdout()
            click.echo(
                "gitops-sched: out of memory: this repo's cluster or workloads are more than "
                "this machine (or its memory limit) can hold",
                err=True,
            )
            sys.exit(EXIT_USAGE)
        except Exception as exc:
            kube = sys.modules.get("kubernetes.config.config_exception")
            if kube is not None and isinstance(exc, kube.ConfigException):
                # no cluster to talk to (no KUBECONFIG, no ~/.kube/config, not in a pod)
                why = f"no cluster configuration: {exc}; give --kubeconfig, or run in a pod"
                click.echo(printable(f"gitops-sched: {why}"), err=True)
                sys.exit(EXIT_USAGE)
            jinja2 = sys.modules.get("jinja2")  # loaded by whatever rendered a template
            if jinja2 is None or not isinstance(exc, jinja2.TemplateError):
                raise
            # validate rendered every expression; a render past the template time budget
            # (the checks spent most of it) still ends with a message, not a traceback
            click.echo(
                printable(f"gitops-sched: cannot render a template expression: {exc}"), err=True
            )
            _discard_stdout()
            sys.exit(EXIT_INVALID)


@click.group(cls=_Commands)
@click.version_option(package_name="gitops-sched")
def main() -> None:
    """Declare a shared GPU cluster in Git: validate, render, plan and simulate it."""


@main.command()
@repo_path
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    help="text (FILE:LINE:COL: error CODE Kind/name: message), json, or GitHub annotations.",
)
@exclude_option
def validate(path: Path, fmt: str, excludes: tuple[str, ...]) -> None:
    """Check a config repo against the schemas and the semantic rules."""
    from gitops_sched.validate import check_repo

    repo, diagnostics = check_repo(path, excludes)
    _print_diagnostics(diagnostics, fmt)
    if repo is None:
        sys.exit(EXIT_INVALID)
    if fmt == "text":
        counts = f"{len(repo.projects)} projects, {len(repo.workloads)} workloads"
        summary = f"{path}: valid ({counts}, {repo.gpu_capacity} GPUs{_simulations(repo)})"
        click.echo(printable(summary), err=True)


def _simulations(repo: Repo) -> str:
    """`, 2 Simulations` when the repo holds some (what `gitops-sched test` runs)."""
    count = len(repo.simulations)
    return f", {count} Simulation{'s' if count > 1 else ''}" if count else ""


@main.command()
@repo_path
@click.option(
    "-o",
    "--output",
    required=True,
    help="Directory to write (one file per object plus kustomization.yaml), or - for stdout.",
)
@target_option
@exclude_option
def render(path: Path, output: str, target: str, excludes: tuple[str, ...]) -> None:
    """Compile a config repo to Kubernetes YAML, for our scheduler or for KAI or Kueue.

    What the target cannot express is printed as warnings at the config's lines."""
    from gitops_sched.compiler.output import write_directory, write_stream
    from gitops_sched.config.ignore import IGNORE_FILE
    from gitops_sched.config.loader import loaded_folder

    inside = None if output == "-" else loaded_folder(path, Path(output))
    if inside is not None:  # rendered objects share our apiVersion: they would load as config
        ignore = "" if inside == "." else f", or add `/{inside}/` to {path / IGNORE_FILE}"
        raise click.UsageError(
            printable(
                f"the output folder {output} is inside the config folder {path}: validate, "
                f"plan and render would read the rendered files as config; render "
                f"elsewhere{ignore}"
            )
        )
    from gitops_sched.compiler.targets import render_target

    if not output:
        raise click.UsageError("-o/--output is empty: name a directory, or - for stdout")
    repo = load_or_exit(path, excludes)
    rendered = render_target(repo, target)
    _print_diagnostics(Diagnostics(list(rendered.diagnostics)))
    if rendered.failed:
        sys.exit(EXIT_INVALID)
    objects = rendered.objects
    if output == "-":
        write_stream(objects, sys.stdout)
        sys.stdout.flush()  # a full disk shows here, inside the command (see _Commands)
        return
    try:
        write_directory(objects, Path(output))
    except ValueError as exc:  # an output path render must not replace
        raise click.UsageError(printable(str(exc))) from exc
    except OSError as exc:  # full disk, a file where a folder goes, no permission, ...
        click.echo(printable(f"render: cannot write {output}: {exc.strerror or exc}"), err=True)
        sys.exit(EXIT_USAGE)
    click.echo(printable(f"{output}: {len(objects)} objects written"), err=True)


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush of what could not
    be written does not fail again with a traceback on the way out."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


events_option = click.option(
    "--events",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A Simulation file: nodes, running workloads and steps (default: submit the repo's).",
)


def _simulation_or_exit(events: Path | None, repo: Repo) -> Simulation | None:
    """The events file's simulation (None: none given), or its diagnostics and exit 1."""
    from gitops_sched.sim.events import load_simulation

    if events is None:
        return None
    diagnostics = Diagnostics()
    simulation = load_simulation(events, repo, diagnostics)
    _print_diagnostics(diagnostics)
    if simulation is None:
        sys.exit(EXIT_INVALID)
    return simulation


@main.command()
@repo_path
@events_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    help="Rich tables, or JSON whose `workloads` can seed a later run's `running:`.",
)
@exclude_option
def simulate(path: Path, events: Path | None, fmt: str, excludes: tuple[str, ...]) -> None:
    """Run the scheduler on a simulated cluster built from the node groups.

    Exits 1 when the config or the events file is invalid, or an expectation is not met.
    """
    import json

    from gitops_sched.console import output_console
    from gitops_sched.sim.report import print_table, to_json
    from gitops_sched.sim.run import simulate as run_simulation

    repo = load_or_exit(path, excludes)
    result = run_simulation(repo, _simulation_or_exit(events, repo))
    if fmt == "json":
        click.echo(json.dumps(to_json(result), indent=2))
    else:
        console = output_console()
        print_table(result, console)
        console.file.flush()
    sys.exit(EXIT_INVALID if result.failures else 0)


@main.command()
@repo_path
@click.argument("workload")
@events_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    help="Plain text, or JSON with the same content.",
)
@exclude_option
def explain(
    path: Path, workload: str, events: Path | None, fmt: str, excludes: tuple[str, ...]
) -> None:
    """Why WORKLOAD (`name` or `project/name`) runs where it runs, or why it is pending, and
    how its project's fair share was derived, after the same run as `simulate`.

    Exits 1 when the config or the events file is invalid, 2 when WORKLOAD is unknown.
    """
    import json

    from gitops_sched.sim.explain import ExplainError, to_json, to_text
    from gitops_sched.sim.explain import explain as explain_workload

    repo = load_or_exit(path, excludes)
    try:
        explanation = explain_workload(repo, _simulation_or_exit(events, repo), workload)
    except ExplainError as exc:
        raise click.UsageError(printable(str(exc))) from exc
    if fmt == "json":
        click.echo(json.dumps(to_json(explanation), indent=2))
    else:
        click.echo(to_text(explanation), nl=False)


@main.command("test")
@repo_path
@click.option(
    "--junit",
    type=click.Path(dir_okay=False),
    help="Also write the results as JUnit XML, for CI test reports.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    help="PASS/FAIL per scenario and per expect: step, or JSON with the same content.",
)
@exclude_option
def run_tests(path: Path, junit: str | None, fmt: str, excludes: tuple[str, ...]) -> None:
    """Run the repo's Simulation documents and check their `expect:` steps.

    Exits 0 when every expectation is met (or the repo has no Simulation documents), 1 when
    one is not or the config is invalid, 2 on a usage error (a JUnit file it cannot write).
    """
    import json

    from gitops_sched.sim.junit import junit_xml
    from gitops_sched.sim.scenarios import json_report, run_scenarios, text_report

    if junit == "":  # Path("") is the current folder
        raise click.UsageError("--junit is empty: name the report file")
    repo = load_or_exit(path, excludes)
    diagnostics = Diagnostics()
    results = run_scenarios(repo, diagnostics)
    if diagnostics.has_errors:  # none expected: validating the repo parsed each Simulation
        _print_diagnostics(diagnostics)
    if not repo.simulations:
        click.echo(printable(f"{path}: no Simulation documents found (nothing to test)"), err=True)
    elif fmt == "json":
        click.echo(json.dumps(json_report(results), indent=2))
    else:
        click.echo(printable("\n".join(text_report(results))))
    if junit is not None:
        from gitops_sched.compiler.writing import write_report

        try:
            write_report(Path(junit), junit_xml(results))
        except ValueError as exc:
            click.echo(printable(f"Error: {exc}"), err=True)
            sys.exit(EXIT_USAGE)
        except OSError as exc:
            click.echo(printable(f"Error: cannot write {junit}: {exc.strerror or exc}"), err=True)
            sys.exit(EXIT_USAGE)
    failed = diagnostics.has_errors or not all(result.passed for result in results)
    sys.exit(EXIT_INVALID if failed else 0)


@main.command()
@repo_path
@click.option("--base", "base_ref", required=True, help="Git ref of the config before the change.")
@click.option("--head", "head_ref", help="Git ref of the change (default: the working tree).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    help="Markdown for a pull-request comment, or JSON with the same content.",
)
@click.option(
    "--state",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The cluster now, as `simulate --format json` prints it (default: the repo's "
    "workloads settled under the base config).",
)
@target_option
@exclude_option
def plan(
    path: Path,
    base_ref: str,
    head_ref: str | None,
    fmt: str,
    state: Path | None,
    target: str,
    excludes: tuple[str, ...],
) -> None:
    """What a change does: objects, quota and capacity deltas, fair-share impact.

    With --target kai|kueue the object diff is of that scheduler's objects, and the plan says
    where it may decide otherwise than the simulation. Exits 0 when the head is valid
    (changes are not failures), 1 when it is invalid, 2 for usage errors (not a Git repo,
    unknown ref, a state that does not fit). Each side leaves out what its own
    .gitops-schedignore says, and both what --exclude says.
    """
    import json

    from gitops_sched.plan.build import PlanInputError, make_plan
    from gitops_sched.plan.jsonout import to_json
    from gitops_sched.plan.markdown import render as render_markdown

    try:
        result = make_plan(path, base_ref, head_ref, state, excludes, target)
    except PlanInputError as exc:
        click.echo(printable(f"Error: {exc}"), err=True)
        sys.exit(EXIT_USAGE)
    if not result.head.valid:
        _print_diagnostics(result.head.diagnostics)
    if fmt == "json":
        click.echo(json.dumps(to_json(result), indent=2))
    else:
        click.echo(render_markdown(result), nl=False)
    sys.exit(0 if result.head.valid else EXIT_INVALID)


def _duration(text: str) -> float:
    """`60`, `60s`, `5m`, `1h` as seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1:] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not a duration like 60s, 5m or 1h") from exc


@main.command()
@click.option("--repo", required=True, help="Config repo: a Git URL (HTTPS/SSH) or a local path.")
@click.option("--ref", help="Branch, tag or commit to sync (default: the remote's HEAD).")
@click.option("--path", "subdir", help="Folder of the config inside the repo.")
@click.option("--interval", default="60s", show_default=True, help="Time between syncs.")
@click.option("--once", is_flag=True, help="Sync once and exit (1 when the sync failed).")
@click.option("--dry-run", is_flag=True, help="Print what one sync would change, and exit.")
@click.option("--name", default="gitops-sched", show_default=True, help="This reconciler's name.")
@click.option(
    "--namespace",
    envvar="POD_NAMESPACE",
    default="gitops-sched",
    show_default=True,
    help="Namespace of the inventory, Lease and Events.",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Default: KUBECONFIG.")
@click.option(
    "--prune-namespaces",
    type=click.Choice(["empty", "always", "never"]),
    default="empty",
    show_default=True,
    help="Delete removed projects' namespaces only when they hold nothing else.",
)
@click.option(
    "--adopt",
    is_flag=True,
    help="Take over objects the repo renders that exist already, made by someone else "
    "(default: refuse them; one object opts in with the annotation gitops-sched.io/adopt=true).",
)
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True)
@click.option("--listen", default=":8080", show_default=True, help="/metrics, /healthz, /readyz.")
def reconcile(
    repo: str,
    ref: str | None,
    subdir: str | None,
    interval: str,
    once: bool,
    dry_run: bool,
    name: str,
    namespace: str,
    kubeconfig: str | None,
    prune_namespaces: str,
    adopt: bool,
    leader_elect: bool,
    listen: str,
) -> None:
    """Keep the cluster equal to the config repo (the in-cluster reconciler)."""
    from gitops_sched.reconciler.main import run_reconciler

    sys.exit(
        run_reconciler(
            repo=repo,
            ref=ref,
            path=subdir,
            interval=_duration(interval),
            once=once or dry_run,  # a dry run prints what one sync would do, and exits
            dry_run=dry_run,
            name=name,
            namespace=namespace,
            kubeconfig=kubeconfig,
            prune_namespaces=prune_namespaces,
            adopt=adopt,
            leader_elect=leader_elect and not (once or dry_run),
            listen=listen,
        )
    )


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Default: in-cluster.")
@click.option("--once", is_flag=True, help="Run one cycle and exit (1 on errors).")
@click.option("--dry-run", is_flag=True, help="Print what one cycle would do; write nothing.")
@click.option("--cycle-period", default="1s", show_default=True, help="Time between cycles.")
@click.option(
    "--namespace",
    envvar="POD_NAMESPACE",
    default="gitops-sched-system",
    show_default=True,
    help="The system namespace: policy ConfigMap, Lease, GPU reservation pods.",
)
@click.option(
    "--reservation-image",
    envvar="GITOPS_SCHED_IMAGE",
    default="ghcr.io/gitops-sched/gitops-sched:latest",
    show_default=True,
    help="Image of the pods that hold shared GPUs (runs `gitops-sched reserve`).",
)
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True)
@click.option("--listen", default=":8080", show_default=True, help="/metrics, /healthz, /readyz.")
def scheduler(
    kubeconfig: str | None,
    once: bool,
    dry_run: bool,
    cycle_period: str,
    namespace: str,
    reservation_image: str,
    leader_elect: bool,
    listen: str,
) -> None:
    """Place the pods of gitops-sched's schedulerName (the in-cluster scheduler)."""
    from gitops_sched.scheduler.loop import Settings
    from gitops_sched.scheduler.main import run_scheduler

    settings = Settings(
        namespace=namespace,
        cycle_period=_duration(cycle_period),
        dry_run=dry_run,
        reservation_image=reservation_image,
    )
    once = once or dry_run  # a dry run prints what one cycle would do, and exits
    sys.exit(
        run_scheduler(
            settings, kubeconfig, once=once, leader_elect=leader_elect and not once, listen=listen
        )
    )


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Default: in-cluster.")
@click.option("--once", is_flag=True, help="Publish the GPU's UUID and exit instead of holding it.")
def reserve(kubeconfig: str | None, once: bool) -> None:
    """Hold a GPU for the pods sharing it (what a GPU reservation pod runs).

    Writes the UUID of the GPU the device plugin gave this pod (NVIDIA_VISIBLE_DEVICES) to
    the pod's annotation (POD_NAME, POD_NAMESPACE), then sleeps until terminated. Exits 1
    when it cannot tell which GPU it holds or cannot write the annotation.
    """
    import os

    from kubernetes.config.config_exception import ConfigException

    from gitops_sched.cluster import ClusterClient, load_configuration
    from gitops_sched.scheduler.reserve import run

    try:
        client = ClusterClient(load_configuration(kubeconfig), user_agent="gitops-sched-reserve")
    except ConfigException as exc:
        click.echo(f"reserve: {exc}", err=True)
        sys.exit(EXIT_INVALID)
    try:
        sys.exit(run(os.environ, client, once=once))
    finally:
        client.close()


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Default: KUBECONFIG.")
@click.option(
    "--node", envvar="NODE_NAME", help="This node's name (default: NODE_NAME, else the host name)."
)
@click.option("--once", is_flag=True, help="One tick, then exit.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Change nothing: print the inventory, and each write it would make when a cluster "
    "is configured.",
)
@click.option(
    "--fake",
    metavar="MODEL:COUNT[,MODEL:COUNT]",
    help="Fake GPUs with real models' numbers instead of NVML (`A100-80GB:2:mig` for MIG mode).",
)
@click.option("--interval", default="10s", show_default=True, help="Time between ticks.")
@click.option(
    "--fraction-policy",
    type=click.Choice(["warn", "evict"]),
    default="warn",
    show_default=True,
    help="A fraction pod over its GPU memory share: an Event only, or also an Eviction.",
)
@click.option(
    "--grace",
    default="60s",
    show_default=True,
    help="How long a pod stays over its share before it is evicted (evict policy).",
)
@click.option(
    "--idle-window",
    default="5m",
    show_default=True,
    help="How long an interactive pod leaves its GPUs unused before it is published idle.",
)
@click.option(
    "--mig-static",
    is_flag=True,
    help="Never change this node's MIG layout (as the node label gitops-sched.io/mig-static).",
)
@click.option(
    "--device-plugin-namespace",
    default="gpu-operator",
    show_default=True,
    help="Where the NVIDIA device plugin's pods run.",
)
@click.option(
    "--device-plugin-selector",
    default="app=nvidia-device-plugin-daemonset",
    show_default=True,
    help="The device plugin pods' label selector.",
)
@click.option("--listen", default="", help="Serve /metrics, /healthz, /readyz (e.g. :8080).")
def agent(
    kubeconfig: str | None,
    node: str | None,
    once: bool,
    dry_run: bool,
    fake: str | None,
    interval: str,
    fraction_policy: str,
    grace: str,
    idle_window: str,
    mig_static: bool,
    device_plugin_namespace: str,
    device_plugin_selector: str,
    listen: str,
) -> None:
    """The node agent: publishes the node's GPUs, makes the MIG instances the scheduler asks
    for, enforces fraction memory shares and marks idle interactive pods.

    Exits 1 when there is no NVIDIA driver (and no --fake), or on a failure with --once;
    2 on a usage error.
    """
    from gitops_sched.agent.cluster import DevicePlugin
    from gitops_sched.agent.main import run_agent
    from gitops_sched.agent.node import AgentPolicy

    policy = AgentPolicy(
        fraction_policy="evict" if fraction_policy == "evict" else "warn",
        grace=_duration(grace),
        idle_window=_duration(idle_window),
        mig_static=mig_static,
    )
    sys.exit(
        run_agent(
            node=node,
            once=once,
            dry_run=dry_run,
            fake=fake,
            kubeconfig=kubeconfig,
            interval=_duration(interval),
            policy=policy,
            device_plugin=DevicePlugin(device_plugin_namespace, device_plugin_selector),
            listen=listen,
        )
    )


if __name__ == "__main__":  # `python -m gitops_sched.cli` runs the command, not nothing
    main(prog_name="gitops-sched")

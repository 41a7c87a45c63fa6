"""The CLI's surface: the commands `--help` lists all work, shell completion is there, the
declared dependencies are the ones the package imports, and the agent's NVML bindings are
an extra whose absence the agent explains in one line."""

from __future__ import annotations

import ast
import re
import resource
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitops_sched.cli import main

ROOT = Path(__file__).resolve().parent.parent


def listed_commands() -> list[str]:
    """The command names under `Commands:` in `gitops-sched --help`."""
    text = CliRunner().invoke(main, ["--help"]).stdout
    return re.findall(r"^  ([a-z-]+)  ", text.split("Commands:")[1], re.MULTILINE)


def test_help_lists_every_command_and_each_one_answers_help() -> None:
    commands = listed_commands()
    assert sorted(commands) == sorted(main.commands)
    assert {"validate", "render", "plan", "explain", "test", "simulate"} <= set(commands)
    for command in commands:
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0, (command, result.output)
        assert result.stdout.startswith(f"Usage: main {command} "), result.stdout


def test_shell_completion_completes_command_names() -> None:
    runner = CliRunner()
    script = runner.invoke(
        main, [], prog_name="gitops-sched", env={"_GITOPS_SCHED_COMPLETE": "bash_source"}
    )
    assert "_gitops_sched_completion" in script.stdout
    env = {"_GITOPS_SCHED_COMPLETE": "bash_complete", "COMP_WORDS": "gitops-sched te"}
    result = runner.invoke(main, [], prog_name="gitops-sched", env={**env, "COMP_CWORD": "1"})
    assert result.stdout.split() == ["plain,test"]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(items: list[str]) -> set[str]:
    return {_normal(re.match(r"[A-Za-z0-9_.-]+", item)[0]) for item in items}  # type: ignore[index]


def _imported_distributions() -> set[str]:
    """The third-party distributions the package's modules import."""
    modules: set[str] = set()
    for path in (ROOT / "gitops_sched").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    owners = packages_distributions()
    third_party = modules - set(sys.stdlib_module_names) - {"gitops_sched"}
    return {_normal(dist) for module in third_party for dist in owners.get(module, [module])}


def test_declared_dependencies_are_the_ones_imported() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _requirements(project["dependencies"])
    agent = _requirements(project["optional-dependencies"]["agent"])
    assert agent == {"nvidia-ml-py"}
    assert agent <= _requirements(project["optional-dependencies"]["test"])  # agent tests run
    assert _imported_distributions() == runtime | agent


def test_the_agent_without_nvml_bindings_says_how_to_install_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` fails as if absent
    monkeypatch.delitem(sys.modules, "gitops_sched.agent.nvml", raising=False)
    result = CliRunner().invoke(main, ["agent", "--once", "--dry-run"])
    assert result.exit_code == 1
    assert result.stderr == (
        "agent: the NVML bindings are not installed: pip install 'gitops-sched[agent]' "
        "(or use --fake MODEL:COUNT to run without GPUs)\n"
    )


def test_the_cli_module_loads_no_config_stack() -> None:
    """`--version`, `--help` and completion import the CLI module alone: it must not pull in
    YAML, JSON Schema, Jinja2 or the Kubernetes client (they double the start-up time)."""
    heavy = ["yaml", "jsonschema", "jinja2", "kubernetes", "rich", "gitops_sched.engine"]
    code = f"import sys, gitops_sched.cli; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout == "[]\n", result.stderr


@pytest.mark.parametrize("args", [["scheduler"], ["reconcile", "--repo", "."]])
def test_no_cluster_configuration_is_one_line_and_exit_2(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer who runs a cluster command with no KUBECONFIG, no ~/.kube/config and
    outside a pod is told what to set, not shown a traceback."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "KUBECONFIG" in lines[0]


@pytest.mark.parametrize(("columns", "least", "width"), [("", 80, 160), ("50", 40, 50)])
def test_piped_tables_are_columns_wide_with_no_trailing_spaces(
    columns: str, least: int, width: int
) -> None:
    # unset COLUMNS: up to 160 wide (rich's 80 would cut reasons and UUIDs), else as it says
    example = str(ROOT / "examples" / "clusters" / "oci-a100")
    result = CliRunner().invoke(main, ["simulate", example], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "Decisions" in lines
    assert all(line == line.rstrip() for line in lines)
    assert least < max(len(line) for line in lines) <= width


def test_running_out_of_memory_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    # the schema's largest node group, 100,000 nodes of 64 GPUs, under a 1 GB address space:
    # its JSON lists 6.4 million GPUs (the table, which lists none idle, fits)
    repo = tmp_path / "big"
    shutil.copytree(ROOT / "examples" / "walkthrough", repo)
    cluster = repo / "cluster.yaml"
    text = cluster.read_text().replace("nodeCount: 2", "nodeCount: 100000")
    cluster.write_text(text.replace("gpusPerNode: 8", "gpusPerNode: 64"))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    result = subprocess.run(
        [sys.executable, "-c", "from gitops_sched.cli import main; main()", "simulate", str(repo)]
        + ["--format", "json"],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "gitops-sched: out of memory: this repo's cluster or workloads are more than this "
        "machine (or its memory limit) can hold"
    ]
    assert result.stdout == ""


@pytest.mark.parametrize("module", ["gitops_sched", "gitops_sched.cli"])
def test_python_m_runs_the_command(module: str) -> None:
    # where the console script is not on the PATH; the cli module once ran nothing, exit 0
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", module, "validate", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)

    good = run("examples/clusters/netapp-dgx")
    assert good.returncode == 0, good.stderr
    assert "examples/clusters/netapp-dgx: valid" in good.stderr
    bad = run("examples/clusters/broken/duplicate-name")
    assert bad.returncode == 1, bad.stderr
    assert "error GS" in bad.stdout + bad.stderr
    usage = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False
    )
    assert usage.stdout.startswith("Usage: gitops-sched "), usage.stdout

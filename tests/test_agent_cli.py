"""`gitops-sched agent`: the dry run prints the node's inventory; no driver, no publishing."""

import pynvml
from click.testing import CliRunner
from rich.console import Console

from gitops_sched.agent.main import run_agent
from gitops_sched.cli import main


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


def test_publishing_is_not_built_yet_and_exits_2():
    result = run("--once", "--fake", "A10:1")
    assert result.exit_code == 2
    assert "not built yet" in result.output and result.output.count("\n") == 1


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

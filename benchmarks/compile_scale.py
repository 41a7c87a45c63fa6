"""Scale benchmark for the config compiler (not a test): prints one JSON object.

    .venv/bin/python benchmarks/compile_scale.py [--seed 1] [--departments 50]
        [--projects 1000] [--workloads 10000] [--repeat 3] [--write-dir] [--keep DIR]

What it writes, deterministically from `--seed` (``random.Random(seed)`` only, no clock),
into a temporary directory (or `--keep DIR`):

* one Cluster; GPU node groups ``h100`` (H100-SXM5-80GB, racks as topology domains),
  ``a100`` (A100-SXM4-80GB), ``a100-mig`` (A100-SXM4-80GB, MIG dynamic) and ``l40s`` (L40S,
  for fractions and notebooks), plus a ``cpu`` worker group. Node counts are sized so the
  departments' quotas, and the per-node-group quotas, fit the capacity.
* `--departments` departments, each quota the sum of its projects' plus some slack; some
  with CPU/memory quotas, limits, over-quota weights. One file per department.
* `--projects` projects spread over the departments (one file of projects per department):
  overall or per-node-group GPU quotas, allowed node groups (some per workload type),
  over-quota rules, time limits, members, labels.
* five templates: the default one (Jinja2 in `env`: ``{{ project.name }}`` and more),
  distributed training, notebook, inference service and sweep.
* `--workloads` workloads, one file per project, in proportion to the project's quota:
  whole-GPU training, gangs, fractions, GPU memory, MIG, interactive and inference.
  Non-preemptible work is kept within each project's quota, so the repo validates clean
  (checked before anything is timed).

What it measures (best of `--repeat`, ``time.perf_counter``, GC left on):

* ``parse_s``: reading every YAML file and ``yaml.load_all(text, Loader=yaml.CSafeLoader)``:
  the YAML alone, with PyYAML's C parser: the floor any YAML-based tool pays.
* ``validate_s``: ``check_repo(path)`` end to end (load with positions, schema, model, checks).
* ``render_s``: ``render_repo(repo)`` plus serialising every object into one stream in memory
  (what ``render -o -`` does, without the terminal).
* ``write_dir_s`` (with `--write-dir`): ``write_directory`` into a temporary directory; disk
  bound, so reported apart from the ratio.
* ``ratio_validate_render_over_parse``: (validate_s + render_s) / parse_s.
* ``first_run_s``: the first of the runs, with the process's caches cold (parsed Jinja2
  templates, resolved YAML scalars, quoted strings): what a one-shot CLI run pays.

The goal: validate + render within 3x the parse time and under 5 s. Other processes may
share the machine (``machine.load_average_1m``): compare runs by the best of several.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import math
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gitops_sched.compiler import render_repo
from gitops_sched.compiler.output import write_directory, write_stream
from gitops_sched.config.model import Repo
from gitops_sched.validate import check_repo

API_VERSION = "gitops-sched.io/v1alpha1"
GPUS_PER_NODE = 8
GOAL_RATIO = 3.0
GOAL_SECONDS = 5.0
NON_PREEMPTIBLE_SHARE = 0.75  # of a project's quota that interactive/inference may take


@dataclass(frozen=True)
class GroupSpec:
    name: str
    model: str
    memory_gib: int
    share: float  # of the GPUs
    mig: bool = False
    rack: bool = False


GROUPS = (
    GroupSpec("h100", "H100-SXM5-80GB", 80, 0.30, rack=True),
    GroupSpec("a100", "A100-SXM4-80GB", 80, 0.35),
    GroupSpec("a100-mig", "A100-SXM4-80GB", 80, 0.15, mig=True),
    GroupSpec("l40s", "L40S", 48, 0.20),
)
WHOLE = ("h100", "a100")
MIG_SHARES = {"1g.10gb": 1 / 7, "2g.20gb": 2 / 7, "3g.40gb": 3 / 7}
SMALLEST_GIB = min(g.memory_gib for g in GROUPS)

# project profile -> (weight, allowed node groups, allowed by workload type)
PROFILES: dict[str, tuple[int, list[str], dict[str, list[str]]]] = {
    "all": (50, [], {}),
    "training": (25, ["h100", "a100", "l40s"], {"interactive": ["l40s"]}),
    "shared": (15, ["a100-mig", "l40s"], {"interactive": ["l40s"]}),
    "per-group": (10, ["h100", "a100", "l40s"], {"inference": ["a100"]}),
}
QUOTAS = (2, 4, 4, 6, 8, 8, 8, 12, 16, 16, 24, 32)
AREAS = ("research", "vision", "speech", "search", "ads", "robotics", "health", "finance")
TEAMS = ("ranking", "llm", "eval", "infra", "retrieval", "agents", "perception", "forecast")
# workload kind -> weight
WORKLOAD_MIX = {
    "train": 40,
    "gang": 8,
    "fraction": 12,
    "mig": 10,
    "sweep": 8,
    "interactive": 14,
    "inference": 8,
}


def doc(kind: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    metadata = {"name": name, **meta}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def apportion(total: int, weights: list[float]) -> list[int]:
    """Integers proportional to `weights` that sum to `total` (largest remainder)."""
    exact = [total * w / sum(weights) for w in weights]
    parts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (parts[i] - exact[i], i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


# -- generation ----------------------------------------------------------------------------


@dataclass
class ProjectPlan:
    name: str
    department: str
    profile: str
    quota: int
    group_quotas: dict[str, int] = field(default_factory=dict)
    budget: float = 0.0  # GPUs left for non-preemptible work

    def groups(self, wtype: str) -> list[str]:
        """The node groups this project's `wtype` workloads may use (empty: every GPU group)."""
        _, allowed, by_type = PROFILES[self.profile]
        return by_type.get(wtype, allowed)

    def may_use(self, wtype: str, group: str) -> bool:
        groups = self.groups(wtype)
        return not groups or group in groups


def plan_projects(rng: random.Random, departments: list[str], count: int) -> list[ProjectPlan]:
    names = list(PROFILES)
    weights = [PROFILES[p][0] for p in names]
    plans = []
    for i in range(count):
        department = departments[i % len(departments)]
        profile = rng.choices(names, weights)[0]
        quota = rng.choice(QUOTAS)
        plan = ProjectPlan(f"{department}-{rng.choice(TEAMS)}-{i:04d}", department, profile, quota)
        if profile == "per-group":
            h100 = rng.randint(0, quota)
            plan.group_quotas = {"h100": h100, "a100": quota - h100}
        plan.budget = quota * NON_PREEMPTIBLE_SHARE
        plans.append(plan)
    return plans


def project_doc(rng: random.Random, plan: ProjectPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {"department": plan.department}
    if plan.group_quotas:
        spec["nodeGroupQuotas"] = {g: {"gpu": q} for g, q in plan.group_quotas.items()}
    else:
        spec["quota"] = {"gpu": plan.quota}
        if rng.random() < 0.3:
            spec["quota"] |= {"cpu": str(plan.quota * 16), "memory": f"{plan.quota * 128}Gi"}
    if rng.random() < 0.1:
        spec["overQuota"] = "denied"
    elif rng.random() < 0.2:
        spec["overQuotaWeight"] = rng.choice((0, 1, 2, 4))
    if rng.random() < 0.1:
        spec["overQuotaRank"] = 1
    if rng.random() < 0.1:
        spec["limit"] = {"gpu": plan.quota * 2}
    _, allowed, by_type = PROFILES[plan.profile]
    if allowed:
        spec["nodeGroups"] = {"allowed": allowed, **({"byType": by_type} if by_type else {})}
    if rng.random() < 0.5:
        spec["interactiveTimeLimit"] = rng.choice(("4h", "8h", "12h", "1d"))
        spec["idleGpuTimeout"] = rng.choice(("30m", "1h", "2h"))
    spec["members"] = {
        "users": [f"user{rng.randrange(5000)}@example.com" for _ in range(rng.randint(1, 4))],
        "groups": [plan.name],
    }
    labels = {"cost-center": f"cc-{rng.randrange(100):03d}"}
    return doc("Project", plan.name, spec, labels=labels)


def department_doc(rng: random.Random, name: str, plans: list[ProjectPlan]) -> dict[str, Any]:
    gpus = sum(p.quota for p in plans) + rng.randint(0, 8)
    spec: dict[str, Any] = {"quota": {"gpu": gpus}}
    if rng.random() < 0.3:
        spec["quota"] |= {"cpu": str(gpus * 32), "memory": f"{gpus * 256}Gi"}
    if rng.random() < 0.3:
        spec["limit"] = {"gpu": gpus * 2}
    if rng.random() < 0.5:
        spec["overQuotaWeight"] = rng.choice((1, 2, 3))
    spec["admins"] = [f"admin{rng.randrange(500)}@example.com" for _ in range(rng.randint(1, 3))]
    return doc("Department", name, spec)


def node_group_docs(department_gpus: int, plans: list[ProjectPlan]) -> list[dict[str, Any]]:
    """GPU groups sized to hold every department quota and every per-node-group quota."""
    pinned = {g.name: 0 for g in GROUPS}
    for plan in plans:
        for group, quota in plan.group_quotas.items():
            pinned[group] += quota
    docs = []
    for group in GROUPS:
        gpus = max(math.ceil(department_gpus * group.share * 1.1), pinned[group.name])
        docs.append(gpu_group_doc(group, math.ceil(gpus / GPUS_PER_NODE)))
    cpu = {"role": "cpu-worker", "nodeCount": 20, "cpuPerNode": "64", "memoryPerNode": "512Gi"}
    cpu["nodeSelector"] = {"matchLabels": {"node.kubernetes.io/instance-type": "cpu-64"}}
    return [*docs, doc("NodeGroup", "cpu", cpu)]


def gpu_group_doc(group: GroupSpec, nodes: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "role": "gpu-worker",
        # the MIG label tells a100 and a100-mig apart: one model, different nodes
        "nodeSelector": {
            "matchLabels": {
                "nvidia.com/gpu.product": group.model,
                "gpu.example.com/mig": "enabled" if group.mig else "disabled",
            }
        },
        "nodeCount": nodes,
        "gpusPerNode": GPUS_PER_NODE,
        "gpu": {"model": group.model, "memory": f"{group.memory_gib}Gi"},
        "cpuPerNode": "224",
        "memoryPerNode": "2000Gi",
    }
    if group.mig:
        spec["mig"] = {"enabled": True, "strategy": "dynamic"}
    if group.rack:
        spec["topology"] = {"label": "topology.example.com/rack", "nodesPerDomain": 16}
    return doc("NodeGroup", group.name, spec)


def template_docs() -> list[dict[str, Any]]:
    defaults = {
        "default": True,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "env": {
            "NCCL_DEBUG": "WARN",
            "PROJECT": "{{ project.name }}",
            "NAMESPACE": "{{ project.namespace }}",
            "RUN_NAME": "{{ project.name }}-{{ workload.name }}",
            "CLUSTER": "{{ cluster.name }}",
        },
        "resources": {"cpu": "8", "memory": "64Gi"},
    }
    distributed = {
        "command": ["torchrun", "--nnodes={{ workload.replicas }}", "--nproc-per-node=8"],
        "args": ["train.py", "--run-name", "{{ project.name }}-{{ workload.name }}"],
        "env": {"NCCL_IB_HCA": "mlx5", "WORLD_NODES": "{{ workload.replicas }}"},
        "volumes": [
            {"name": "data", "claimName": "datasets", "mountPath": "/datasets", "readOnly": True},
            {"name": "ckpt", "claimName": "{{ project.name }}-ckpt", "mountPath": "/checkpoints"},
        ],
        "sharedMemory": "64Gi",
        "gpu": 8,
        "resources": {"cpu": "96", "memory": "1000Gi"},
    }
    notebook = {
        "command": ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser"],
        "args": ["--ServerApp.base_url=/{{ project.name }}/{{ workload.name }}"],
        "workingDir": "/home/jovyan",
        "ports": [{"name": "jupyter", "containerPort": 8888}],
        "volumes": [
            {"name": "home", "claimName": "home-{{ workload.name }}", "mountPath": "/home/jovyan"}
        ],
        "sharedMemory": "4Gi",
        "resources": {"cpu": "4", "memory": "32Gi"},
    }
    inference = {
        "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
        "command": ["tritonserver"],
        "args": ["--model-repository=/models/{{ workload.name }}", "--http-port=8000"],
        "ports": [{"name": "http", "containerPort": 8000}],
        "volumes": [{"name": "models", "claimName": "models", "mountPath": "/models"}],
        "resources": {"cpu": "8", "memory": "48Gi"},
    }
    sweep = {
        "command": ["python", "sweep.py", "--trial-name", "{{ workload.name }}"],
        "gpu": 1,
        "resources": {"cpu": "8", "memory": "32Gi"},
    }
    specs = {
        "defaults": defaults,
        "distributed-train": distributed,
        "notebook": notebook,
        "inference-service": inference,
        "sweep": sweep,
    }
    return [doc("Template", name, spec) for name, spec in specs.items()]


def _fits(plan: ProjectPlan, gpus: float) -> bool:
    """Spend `gpus` of the project's non-preemptible budget, if it has them."""
    if gpus > plan.budget:
        return False
    plan.budget -= gpus
    return True


def _train(rng: random.Random, plan: ProjectPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "train", "gpu": rng.choice((1, 1, 2, 4, 8))}
    spec["command"] = ["python", "train.py", "--lr", rng.choice(("3e-4", "1e-4", "5e-5"))]
    if rng.random() < 0.2:
        spec["priority"] = rng.choice((40, 60, 80))
    whole = [g for g in plan.groups("train") if g in WHOLE]
    if whole and rng.random() < 0.3:
        spec["nodeGroup"] = rng.choice(whole)
    return spec


def _gang(rng: random.Random, plan: ProjectPlan) -> dict[str, Any] | None:
    replicas = rng.choice((2, 4, 8))
    spec: dict[str, Any] = {"type": "train", "template": "distributed-train"}
    spec |= {"replicas": replicas, "minAvailable": rng.choice((replicas, replicas // 2))}
    if rng.random() < 0.5:
        spec["gpu"] = 4
    return spec


def _fraction(rng: random.Random, plan: ProjectPlan) -> dict[str, Any] | None:
    if not plan.may_use("train", "l40s"):
        return None
    spec = {"type": "train", "nodeGroup": "l40s", "gpu": rng.choice((0.25, 0.5, 0.75))}
    return spec | {"command": ["python", "finetune.py"]}


def _mig(rng: random.Random, plan: ProjectPlan) -> dict[str, Any] | None:
    if not plan.may_use("train", "a100-mig"):
        return None
    spec = {"type": "train", "nodeGroup": "a100-mig", "mig": rng.choice(list(MIG_SHARES))}
    return spec | {"command": ["python", "sweep.py", "--small"]}


def _sweep(rng: random.Random, plan: ProjectPlan) -> dict[str, Any] | None:
    if not any(plan.may_use("train", g) for g in WHOLE):
        return None
    return {"type": "train", "template": "sweep", "priority": 30}


def _interactive(rng: random.Random, plan: ProjectPlan) -> dict[str, Any] | None:
    spec: dict[str, Any] = {"type": "interactive", "template": "notebook"}
    choice = rng.random()
    if choice < 0.5:
        spec["gpu"], gpus = rng.choice(((0.25, 0.25), (0.5, 0.5)))
    elif choice < 0.8:
        spec["gpuMemory"], gpus = "12Gi", 12 / SMALLEST_GIB
    else:
        spec["gpu"], gpus = 1, 1
    return spec if _fits(plan, gpus) else None


def _inference(rng: random.Random, plan: ProjectPlan) -> dict[str, Any] | None:
    replicas = rng.choice((1, 2))
    spec: dict[str, Any] = {"type": "inference", "template": "inference-service"}
    spec["replicas"] = replicas
    if plan.may_use("inference", "a100-mig") and rng.random() < 0.5:
        profile = rng.choice(list(MIG_SHARES))
        spec["mig"], gpus = profile, MIG_SHARES[profile]
    elif any(plan.may_use("inference", g) for g in WHOLE):
        spec["gpu"], gpus = 1, 1
    else:
        return None
    return spec if _fits(plan, gpus * replicas) else None


MAKERS: dict[str, Callable[[random.Random, ProjectPlan], dict[str, Any] | None]] = {
    "train": _train,
    "gang": _gang,
    "fraction": _fraction,
    "mig": _mig,
    "sweep": _sweep,
    "interactive": _interactive,
    "inference": _inference,
}


def workload_docs(rng: random.Random, plan: ProjectPlan, count: int) -> list[dict[str, Any]]:
    """`count` workloads of one project; a kind that does not fit the project becomes train."""
    kinds, weights = list(WORKLOAD_MIX), list(WORKLOAD_MIX.values())
    docs = []
    for i in range(count):
        kind = rng.choices(kinds, weights)[0]
        if (made := MAKERS[kind](rng, plan)) is None:
            kind, made = "train", _train(rng, plan)
        spec = {"project": plan.name, **made}
        meta = {"labels": {"kind": kind}} if rng.random() < 0.2 else {}
        docs.append(doc("Workload", f"{plan.name}-{kind}-{i}", spec, **meta))
    return docs


def cluster_doc() -> dict[str, Any]:
    spec = {
        "kubernetesVersion": "1.32",
        "systemNamespace": "gitops-sched-system",
        "namespacePrefix": "project-",
        "policy": {"cyclePeriod": "10s", "reclaimThreshold": 0.5, "consolidation": True},
    }
    return doc("Cluster", "bench", spec)


def generate(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Relative file path -> the documents it holds."""
    rng = random.Random(args.seed)
    departments = [f"{AREAS[i % len(AREAS)]}-{i:02d}" for i in range(args.departments)]
    plans = plan_projects(rng, departments, args.projects)
    files: dict[str, list[dict[str, Any]]] = {"cluster.yaml": [cluster_doc()]}
    files["templates/templates.yaml"] = template_docs()
    department_gpus = 0
    for department in departments:
        own = [p for p in plans if p.department == department]
        dept = department_doc(rng, department, own)
        department_gpus += dept["spec"]["quota"]["gpu"]
        files[f"departments/{department}.yaml"] = [dept]
        files[f"projects/{department}.yaml"] = [project_doc(rng, p) for p in own]
    for group in node_group_docs(department_gpus, plans):
        files[f"node-groups/{group['metadata']['name']}.yaml"] = [group]
    counts = apportion(args.workloads, [p.quota for p in plans])
    for plan, count in zip(plans, counts):
        files[f"workloads/{plan.department}/{plan.name}.yaml"] = workload_docs(rng, plan, count)
    return files


# libyaml's emitter where PyYAML has it: the same text as `safe_dump_all`, six times faster
# (the property tests write a generated repo per example)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_repo(files: dict[str, list[dict[str, Any]]], root: Path) -> None:
    for name, docs in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.dump_all(docs, Dumper=DUMPER, sort_keys=False, default_flow_style=False)
        path.write_text(f"# generated by benchmarks/compile_scale.py\n{text}", encoding="utf-8")


# -- measurement ---------------------------------------------------------------------------


@dataclass
class Timing:
    best: float  # seconds
    first: float  # the first run: cold caches (parsed templates, resolved scalars, ...)
    result: Any


def best_of(repeat: int, fn: Callable[[], Any]) -> Timing:
    timing = Timing(math.inf, math.inf, None)
    for i in range(repeat):
        gc.collect()
        start = time.perf_counter()
        timing.result = fn()
        elapsed = time.perf_counter() - start
        timing.best = min(timing.best, elapsed)
        timing.first = elapsed if i == 0 else timing.first
    return timing


def yaml_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml"))


def parse_yaml(paths: list[Path]) -> int:
    """The YAML alone: every document of every file as plain data; how many there were."""
    count = 0
    for path in paths:
        text = path.read_text(encoding="utf-8")
        count += sum(1 for _ in yaml.load_all(text, Loader=yaml.CSafeLoader))
    return count


def validate(root: Path) -> Repo:
    repo, diagnostics = check_repo(root)
    if repo is None or diagnostics.items:
        lines = [d.text() for d in diagnostics.sorted()[:20]]
        raise AssertionError("the generated repo does not validate clean:\n" + "\n".join(lines))
    return repo


def render(repo: Repo) -> tuple[int, int]:
    """Objects and characters of the one-stream render (`render -o -`)."""
    objects = render_repo(repo)
    stream = io.StringIO()
    write_stream(objects, stream)
    return len(objects), len(stream.getvalue())


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    paths = yaml_files(root)
    parse = best_of(args.repeat, lambda: parse_yaml(paths))
    validated = best_of(args.repeat, lambda: validate(root))
    rendered = best_of(args.repeat, lambda: render(validated.result))
    repo, (objects, stream_chars) = validated.result, rendered.result
    result: dict[str, Any] = {
        "counts": {
            "files": len(paths),
            "repo_bytes": sum(p.stat().st_size for p in paths),
            "documents": parse.result,
            "departments": len(repo.departments),
            "projects": len(repo.projects),
            "workloads": len(repo.workloads),
            "objects": objects,
            "stream_chars": stream_chars,
        },
        "parse_s": round(parse.best, 4),
        "validate_s": round(validated.best, 4),
        "render_s": round(rendered.best, 4),
        "validate_render_s": round(validated.best + rendered.best, 4),
        "ratio_validate_render_over_parse": round((validated.best + rendered.best) / parse.best, 3),
        "first_run_s": {
            "parse_s": round(parse.first, 4),
            "validate_s": round(validated.first, 4),
            "render_s": round(rendered.first, 4),
        },
    }
    if args.write_dir:
        result["write_dir_s"] = round(time_write_directory(repo, args.repeat), 4)
    return result


def time_write_directory(repo: Repo, repeat: int) -> float:
    objects = render_repo(repo)
    with tempfile.TemporaryDirectory(prefix="compile-scale-out-") as tmp:
        out = Path(tmp) / "rendered"
        return best_of(repeat, lambda: write_directory(objects, out)).best


def goal(result: dict[str, Any]) -> dict[str, Any]:
    ratio, seconds = result["ratio_validate_render_over_parse"], result["validate_render_s"]
    return {
        "max_ratio": GOAL_RATIO,
        "max_validate_render_s": GOAL_SECONDS,
        "met": ratio <= GOAL_RATIO and seconds < GOAL_SECONDS,
    }


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    start = time.perf_counter()
    write_repo(generate(args), root)
    generate_s = time.perf_counter() - start
    result = measure(root, args)
    return {
        "benchmark": "compile_scale",
        "params": {
            k: getattr(args, k) for k in ("seed", "departments", "projects", "workloads", "repeat")
        },
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),  # other processes' share
            "yaml_c_loader": hasattr(yaml, "CSafeLoader"),
        },
        "generate_s": round(generate_s, 3),
        **result,
        "goal": goal(result),
    }


@contextmanager
def repo_dir(keep: str | None) -> Iterator[Path]:
    """`--keep DIR` (new or empty), else a temporary directory removed afterwards."""
    if keep is not None:
        root = Path(keep)
        if root.exists() and any(root.iterdir()):
            raise SystemExit(f"--keep {keep}: the directory exists and is not empty")
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="compile-scale-") as tmp:
        yield Path(tmp)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--departments", type=int, default=50)
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--write-dir", action="store_true", help="also time write_directory")
    parser.add_argument("--keep", metavar="DIR", help="write the repo to DIR (new or empty)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.departments < 1 or args.projects < args.departments:
        parser.error("need --repeat >= 1, --departments >= 1 and --projects >= --departments")
    with repo_dir(args.keep) as root:
        json.dump(run(args, root), sys.stdout, indent=2)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()

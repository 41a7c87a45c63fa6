"""A stand-in for the GitHub Actions runner, enough to run a composite action end to end.

It does what the runner does for a composite action's steps: each `run` step is a bash
script (`bash --noprofile --norc -eo pipefail FILE`, the runner's bash) in the workspace,
with the runner's variables (GITHUB_ACTION_PATH, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY,
RUNNER_TEMP, GITHUB_EVENT_PATH, ...); `${{ }}` expressions and `if:` conditions are
evaluated by GitHub's documented rules (loose equality, `||` and `&&` giving an operand,
`success() &&` implied without a status function); a step's `GITHUB_OUTPUT` becomes its
outputs. `uses:` steps are answered by stand-ins that give what the real action gives.
What the action uses beyond this (another shell, `working-directory`, an unknown function)
fails the run loudly rather than being ignored.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

UsesStandIn = Callable[[dict[str, str]], dict[str, str]]
STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")
TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)"
    r"|(?P<op>==|!=|&&|\|\||[!()])|(?P<name>[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*))"
)
STEP_TIMEOUT_S = 600  # a hung step fails the test instead of hanging it
EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class ActionError(Exception):
    """The action uses something this stand-in does not run (a bug in the test, not the
    action, until the stand-in learns it)."""


@dataclass
class StepRun:
    name: str
    outcome: str  # success, failure or skipped
    inputs: dict[str, str] = field(default_factory=dict)  # a `uses:` step's evaluated `with`
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""


@dataclass
class ActionRun:
    steps: list[StepRun]
    outputs: dict[str, str]
    summary: str
    job_env_changes: str  # what the steps wrote to GITHUB_ENV and GITHUB_PATH

    def step(self, name: str) -> StepRun:
        (found,) = [s for s in self.steps if s.name == name]
        return found


# --- expressions ---------------------------------------------------------------------------


def _number(value: Any) -> float:
    """GitHub's coercion to a number for comparing values of different types."""
    if value is None:
        return 0.0
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip() or 0)
        except ValueError:
            return math.nan
    return math.nan


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if type(left) is type(right) and not isinstance(left, dict | list):
        return left == right
    if isinstance(left, dict | list) or isinstance(right, dict | list):
        return left is right
    return _number(left) == _number(right)


def truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def text(value: Any) -> str:
    """A value as `${{ }}` puts it into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Expression:
    """One expression parsed and evaluated at once (recursive descent)."""

    def __init__(self, source: str, contexts: Mapping[str, Any], failed: bool) -> None:
        self.tokens = self._tokens(source)
        self.at, self.contexts, self.failed = 0, contexts, failed

    @staticmethod
    def _tokens(source: str) -> list[tuple[str, str]]:
        tokens, at = [], 0
        while source[at:].strip():
            found = TOKEN.match(source, at)
            if not found:
                raise ActionError(f"expression {source!r}: cannot read {source[at:]!r}")
            kind = found.lastgroup
            assert kind is not None
            tokens.append((kind, found.group(kind)))
            at = found.end()
        return tokens

    def _peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens) or (expected and self.tokens[self.at][1] != expected):
            raise ActionError(f"expression: expected {expected or 'more'} at token {self.at}")
        self.at += 1
        return self.tokens[self.at - 1]

    def value(self) -> Any:
        result = self._or()
        if self.at != len(self.tokens):
            raise ActionError(f"expression: unexpected {self._peek()!r}")
        return result

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._equality()
        while self._peek() == "&&":
            self._take()
            right = self._equality()
            left = right if truthy(left) else left
        return left

    def _equality(self) -> Any:
        left = self._unary()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            left = _equal(left, right) == (op == "==")
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, token = self._take()
        if token == "(":
            inner = self._or()
            self._take(")")
            return inner
        if kind == "str":
            return token[1:-1].replace("''", "'")
        if kind == "num":
            return float(token)
        if token in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[token]
        if self._peek() == "(":
            self._take()
            self._take(")")
            return self._status(token)
        if kind != "name":
            raise ActionError(f"expression: unexpected {token!r}")
        value: Any = self.contexts
        for part in token.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def _status(self, function: str) -> bool:
        if function not in STATUS_FUNCTIONS:
            raise ActionError(f"expression: function {function}() is not supported here")
        return {"always": True, "cancelled": False, "failure": self.failed}.get(
            function, not self.failed
        )


def evaluate(source: str, contexts: Mapping[str, Any], failed: bool = False) -> Any:
    return _Expression(source, contexts, failed).value()


def substitute(template: str, contexts: Mapping[str, Any]) -> str:
    """A string with each `${{ expression }}` replaced by its value."""
    return EMBEDDED.sub(lambda m: text(evaluate(m.group(1), contexts)), template)


def condition(source: str, contexts: Mapping[str, Any], failed: bool) -> bool:
    """An `if:`: `${{ }}` optional, `success() &&` implied without a status function."""
    source = source.strip()
    whole = EMBEDDED.fullmatch(source)
    source = whole.group(1) if whole else source
    if not re.search(rf"\b({'|'.join(STATUS_FUNCTIONS)})\s*\(", source):
        source = f"success() && ({source})"
    return truthy(evaluate(source, contexts, failed))


# --- the runner ----------------------------------------------------------------------------


def _outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's `name=value` lines and `name<<DELIMITER` blocks."""
    outputs, lines = {}, iter(path.read_text().splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for more in lines:
                if more == delimiter:
                    break
                block.append(more)
            outputs[name] = "\n".join(block)
        elif line:
            name, _, value = line.partition("=")
            outputs[name] = value
    return outputs


@dataclass
class Runner:
    """One job's runner: its workspace, RUNNER_TEMP, event and environment."""

    workspace: Path
    temp: Path
    event_name: str
    event: dict[str, Any]
    env: dict[str, str]  # the runner machine's environment (PATH, HOME, ...)
    uses: dict[str, UsesStandIn]  # `owner/name` (no @ref) -> its stand-in
    repository: str = "org/cluster-config"
    token: str = "ghs_test_token"
    api_url: str = "https://api.github.com"

    def run_action(self, action: Path, with_: dict[str, str]) -> ActionRun:
        """The composite action in folder `action` with inputs `with_`, as `uses:` runs it."""
        spec = yaml.safe_load((action / "action.yml").read_text())
        if spec["runs"]["using"] != "composite":
            raise ActionError("not a composite action")
        event_path = self.temp / "_github_workflow" / "event.json"
        event_path.parent.mkdir(parents=True, exist_ok=True)
        event_path.write_text(json.dumps(self.event))
        files = {
            name: self.temp / "_runner_file_commands" / name
            for name in ("step_summary", "env", "path")
        }
        files["step_summary"].parent.mkdir(parents=True, exist_ok=True)
        for path in files.values():
            path.touch()
        github = {
            "event_name": self.event_name,
            "event": self.event,
            "action_path": str(action),
            "workspace": str(self.workspace),
            "token": self.token,
            "repository": self.repository,
            "api_url": self.api_url,
        }
        contexts: dict[str, Any] = {"github": github, "runner": {"temp": str(self.temp)}}
        contexts["inputs"] = {
            name: substitute(str(with_.get(name, declared.get("default", ""))), contexts)
            for name, declared in (spec.get("inputs") or {}).items()
        }
        unknown = set(with_) - set(contexts["inputs"])
        if unknown:
            raise ActionError(f"inputs the action does not declare: {sorted(unknown)}")
        contexts["steps"] = {}
        base_env = {
            **self.env,
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_ACTION_PATH": str(action),
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_EVENT_NAME": self.event_name,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_REPOSITORY": self.repository,
            "GITHUB_API_URL": self.api_url,
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_STEP_SUMMARY": str(files["step_summary"]),
            "GITHUB_ENV": str(files["env"]),
            "GITHUB_PATH": str(files["path"]),
        }
        runs: list[StepRun] = []
        for index, step in enumerate(spec["runs"]["steps"]):
            failed = any(r.outcome == "failure" for r in runs)
            name = step.get("name") or f"step {index}"
            if not condition(str(step.get("if", "success()")), contexts, failed):
                run = StepRun(name, "skipped")
            else:
                run = self._step(step, name, index, contexts, base_env)
            runs.append(run)
            if "id" in step:
                contexts["steps"][step["id"]] = {
                    "outputs": run.outputs,
                    "outcome": run.outcome,
                    "conclusion": run.outcome,
                }
        outputs = {
            name: substitute(str(declared["value"]), contexts)
            for name, declared in (spec.get("outputs") or {}).items()
        }
        changes = files["env"].read_text() + files["path"].read_text()
        return ActionRun(runs, outputs, files["step_summary"].read_text(), changes)

    def _step(
        self,
        step: dict[str, Any],
        name: str,
        index: int,
        contexts: dict[str, Any],
        base_env: dict[str, str],
    ) -> StepRun:
        unsupported = set(step) - {"name", "id", "if", "uses", "with", "run", "shell", "env"}
        if unsupported:
            raise ActionError(f"step {name}: {sorted(unsupported)} not supported")
        if "uses" in step:
            action = step["uses"].split("@")[0]
            if action not in self.uses:
                raise ActionError(f"step {name}: no stand-in for {step['uses']}")
            inputs = {k: substitute(text(v), contexts) for k, v in (step.get("with") or {}).items()}
            return StepRun(name, "success", inputs, self.uses[action](inputs))
        if step.get("shell") != "bash":
            raise ActionError(f"step {name}: shell {step.get('shell')!r} not supported")
        output = self.temp / "_runner_file_commands" / f"set_output_{index}"
        output.write_text("")
        env = {k: substitute(text(v), contexts) for k, v in (step.get("env") or {}).items()}
        script = self.temp / f"step_{index}.sh"
        script.write_text(substitute(step["run"], contexts))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env={**base_env, "GITHUB_OUTPUT": str(output), **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=STEP_TIMEOUT_S,
        )
        outcome = "success" if done.returncode == 0 else "failure"
        return StepRun(name, outcome, outputs=_outputs(output), log=done.stdout + done.stderr)

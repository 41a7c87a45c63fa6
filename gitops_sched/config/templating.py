"""Jinja2 in template string fields: sandboxed, strict about undefined names.

Only strings holding `{{`/`{%` are rendered, so plain values cost nothing. The same
environment serves the checks (which report unknown names) and the compiler.

Most expressions only print context values (`{{ project.name }}-{{ workload.name }}`);
a large repo renders them tens of thousands of times, and a Jinja2 render call costs far
more than the lookups themselves. So each source is also compiled to a plain lookup plan
when Jinja2's own parse of it is only text and attribute chains; the plan does what the
sandboxed environment does for plain dicts, and hands anything else (a missing name, a
value other than a string or number) to Jinja2, which renders it or raises as ever.

Expressions come from the repo, so a hostile one must fail, not hang the CLI or eat its
memory: the environment caps what one render may cost (see "Limits" below) and raises
TemplateLimitError, which the checks report at the expression like any render error.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from functools import lru_cache
from itertools import islice
from string import Formatter
from typing import Any

from jinja2 import (
    StrictUndefined,
    TemplateError,
    TemplateRuntimeError,
    TemplateSyntaxError,
    Undefined,
    meta,
    nodes,
    pass_context,
)
from jinja2.environment import Template
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gitops_sched.config.model import DEFAULT_NAMESPACE_PREFIX, Cluster, Project, Workload

CONTEXT_NAMES = ("project", "workload", "cluster")

# Limits. Pod fields are short strings: each limit is far above what a real expression
# needs and far below what hurts (a render stays within a few MB and a second or two).
MAX_INT_BITS = 4096  # an integer result (`2 ** 99999999`): about 1,233 decimal digits
MAX_SIZE = 100_000  # a string or list a single operation makes (`'a' * 10**9`, a width)
MAX_RANGE = 10_000  # items in one `range(...)`
MAX_LOOP_ITERATIONS = 100_000  # `{% for %}` iterations in one render, all loops together
MAX_OUTPUT = 100_000  # characters one render prints, captured blocks and macros included
# CPU seconds this thread spends parsing, compiling and rendering templates in one run, all
# of them together (`time_budget`), checked at each loop step and operation: an expression at
# the limit is not paid again per workload. Only template time counts, and only CPU time: the
# checks around the templates, or a busy machine, never fail a valid repo.
MAX_SECONDS = 2.0
MAX_SOURCE = 100_000  # characters of one templated string
# Lexer tokens (spaces included) of one templated string: parsing and compiling cost time
# by the token, not the character (100,000 characters of `{1:1,...}` take a minute to
# compile; plain text around the expressions is one token however long)
MAX_TOKENS = 5_000


class TemplateLimitError(TemplateError):
    """A template expression went past one of the limits above."""


class TemplateTimeError(TemplateLimitError):
    """The run's templates took more than MAX_SECONDS together: no later one is tried."""


def _limit(what: str) -> TemplateLimitError:
    return TemplateLimitError(f"template expression exceeds a limit: {what}")


class _Clock:
    """The CPU time this thread has spent in templates so far (see MAX_SECONDS)."""

    __slots__ = ("since", "spent")

    def __init__(self) -> None:
        self.spent = 0.0
        self.since: float | None = None  # thread_time() when the running template began

    def used(self) -> float:
        running = 0.0 if self.since is None else time.thread_time() - self.since
        return self.spent + running

    @contextmanager
    def running(self) -> Iterator[None]:
        """Count the time inside (a template nested in another is counted once)."""
        if self.since is not None:
            yield
            return
        self.since = time.thread_time()
        try:
            yield
        finally:
            self.spent += time.thread_time() - self.since
            self.since = None


# The run's template clock; None outside `time_budget`
_CLOCK: ContextVar[_Clock | None] = ContextVar("gitops_sched_template_clock", default=None)


@contextmanager
def time_budget() -> Iterator[None]:
    """Every template parsed or rendered inside shares one MAX_SECONDS (a nested budget
    is the outer one's). Outside any, each render has MAX_SECONDS of its own."""
    if _CLOCK.get() is not None:
        yield
        return
    token = _CLOCK.set(_Clock())
    try:
        yield
    finally:
        _CLOCK.reset(token)


def _clock() -> _Clock:
    return _CLOCK.get() or _Clock()


def spend(clock: _Clock | None = None) -> None:
    """Raise TemplateLimitError once the run's (or `clock`'s) template time is spent."""
    if (clock or _CLOCK.get() or _Clock()).used() >= MAX_SECONDS:
        raise TemplateTimeError(
            f"template expression exceeds a limit: rendering took more than {MAX_SECONDS:g} "
            "seconds (the limit for every expression of a run together)"
        )


class _Budget:
    """What one render has spent so far."""

    def __init__(self) -> None:
        self.clock = _clock()
        self.iterations = 0
        self.output = 0
        self.sizes: dict[int, tuple[Any, int]] = {}  # see _size; each value kept alive

    def tick(self) -> None:
        spend(self.clock)


_BUDGET: ContextVar[_Budget | None] = ContextVar("gitops_sched_template_budget", default=None)


def _budget() -> _Budget:
    # None while compiling (Jinja2 folds constants): a throwaway budget then
    return _BUDGET.get() or _Budget()


def _size(value: Any) -> int:
    """About how many characters `value` prints as, a shared item counted each time it
    appears: `[a, a, a]` nested ten deep is tiny in memory and huge once printed.

    Lists, tuples and dicts are remembered for the render, so a structure built a level
    at a time (each level checked as it is made) is walked once; the count stops early
    past MAX_SIZE."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() // 3 + 1
    if not isinstance(value, list | tuple | dict):
        return 1
    sizes = _budget().sizes
    known = sizes.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    total = len(value)
    for item in value.items() if isinstance(value, dict) else value:
        total += _size(item)
        if total > MAX_SIZE:
            break
    sizes[id(value)] = (value, total)
    return total


def _check_size(value: Any, what: str) -> Any:
    if isinstance(value, str | bytes | list | tuple | dict) and _size(value) > MAX_SIZE:
        raise _limit(f"{what} makes a string or list longer than {MAX_SIZE:,}")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _limit(f"{what} makes an integer of more than {MAX_INT_BITS:,} bits")
    return value


def _check_width(width: Any, what: str) -> None:
    if isinstance(width, int) and abs(width) > MAX_SIZE:
        raise _limit(f"{what} of {width:,} is over {MAX_SIZE:,}")


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?")
_BRACE_SPEC = re.compile(r"\{[^{}:]*:([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")


def _check_format(fmt: Any, args: Iterable[Any], what: str, reused: bool = True) -> None:
    """Widths and precisions of `%`-formatting and `str.format` (`'%999999999d'`), and what
    the fields print: each argument once (`'%s%s' % (a, b)`), or, where a field may name an
    argument again (`'{0}{0}'`, `'%(a)s%(a)s'`: `reused`), the largest at every field."""
    if not isinstance(fmt, str):
        return
    args = tuple(args)
    fields = _format_fields(fmt)
    largest = max(map(_size, args), default=0)
    printed = fields * largest if reused else sum(map(_size, args))
    if len(fmt) + printed > MAX_SIZE:
        raise _limit(f"{what} makes a string longer than {MAX_SIZE:,}")
    indirect = False
    widths = []  # each width and precision written in the format
    for width, precision in _PERCENT_SPEC.findall(fmt):
        for number in (width, precision):
            indirect = indirect or number == "*"
            widths += [int(number)] if number.isdigit() else []
    for spec in _BRACE_SPEC.findall(fmt):
        indirect = indirect or "{" in spec
        widths += [int(number) for number in re.findall(r"\d+", spec)]
    if indirect:  # a width taken from the arguments: `'%*d' % (10**9, 1)`
        widths += [arg for arg in args if isinstance(arg, int)]
    for width in widths:
        _check_width(width, f"{what} width")
    if sum(map(abs, widths)) > MAX_SIZE:  # `'%99999s' * 100` written out
        raise _limit(f"{what} widths add up to more than {MAX_SIZE:,}")


def _format_fields(fmt: str) -> int:
    """How many fields a format string has, `%` and `{}` alike (an over-count is safe)."""
    braces = 0
    if "{" in fmt:
        try:
            braces = sum(field is not None for _, field, _, _ in Formatter().parse(fmt))
        except ValueError:  # no str.format string: the call raises, or it is `%` only
            braces = 0
    return max(fmt.count("%"), braces)


def _materialized(value: Any) -> Any:
    """An iterator (`range(9) | map('string')`) as a list, so that its size is known before
    a filter or method builds from it; a list of more than MAX_SIZE items is refused."""
    if not isinstance(value, Iterator):
        return value
    items = list(islice(value, MAX_SIZE + 1))
    if len(items) > MAX_SIZE:
        raise _limit(f"an iterable of more than {MAX_SIZE:,} items")
    return items


def _check_indent(value: Any, width: Any) -> None:
    """`indent`: the width, and the prefix it makes on every line."""
    _check_width(width, "'indent' width")
    prefix = width if isinstance(width, int) else len(width) if isinstance(width, str) else 0
    if isinstance(value, str) and len(value) + (value.count("\n") + 1) * prefix > MAX_SIZE:
        raise _limit(f"'indent' makes a string longer than {MAX_SIZE:,}")


def _args(value: Any) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, dict):
        return tuple(value.values())
    return (value,)


class _LimitedTemplate(Template):
    def render(self, *args: Any, **kwargs: Any) -> str:
        """Template.render, with a fresh budget and the output counted as it comes."""
        ctx = self.new_context(dict(*args, **kwargs))
        budget = _Budget()
        token = _BUDGET.set(budget)
        try:
            with budget.clock.running():
                return self._limited_render(ctx)
        except (RecursionError, MemoryError):
            raise _limit("calls nested too deeply (a macro or loop calling itself)") from None
        except Exception:
            self.environment.handle_exception()
        finally:
            _BUDGET.reset(token)

    def _limited_render(self, ctx: Context) -> str:
        out: list[str] = []
        size = 0
        for chunk in self.root_render_func(ctx):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise _limit(f"output longer than {MAX_OUTPUT:,} characters")
            out.append(chunk)
        text = self.environment.concat(out)
        if _SURROGATE.search(text):  # no UTF-8 writer can write it
            raise TemplateRuntimeError(
                "template expression makes a lone surrogate (\\ud800-\\udfff), which is "
                "no character"
            )
        return str(text)


# what a `{{ ... }}` may print: values that print the same on every run (bool is an int)
_VALUES = (str, int, float, Decimal, list, tuple, dict, range)


def _finalize(value: Any) -> Any:
    """Every `{{ ... }}` printed, in the template or in a block it captures. Only values
    print: a function, a generator or another object (`{{ 'x'.upper }}`, `{{ joiner() }}`,
    `{{ names|map('upper') }}`) would print as its memory address, a different render
    each run, and is refused."""
    if value is not None and not isinstance(value, _VALUES + (Undefined,)):
        raise TemplateRuntimeError(
            f"template expression prints a {type(value).__name__} object, not a value "
            "(call it, print one of its fields, or make it a list)"
        )
    budget = _budget()
    budget.tick()
    budget.output += _size(value)  # before Jinja2 makes it a string
    if budget.output > MAX_OUTPUT:
        raise _limit(f"output longer than {MAX_OUTPUT:,} characters")
    return value


@pass_context  # never folded at compile time: counted per render
def _loop_guard(context: Context, iterable: Any) -> Iterator[Any]:
    budget = _budget()
    for item in iterable:
        budget.iterations += 1
        if budget.iterations > MAX_LOOP_ITERATIONS:
            raise _limit(f"more than {MAX_LOOP_ITERATIONS:,} loop iterations")
        budget.tick()
        yield item


def _concat_guard(items: list[Any]) -> str:
    """`a ~ b`, as Jinja2 joins it, refusing a result over the size limit first."""
    if sum(map(_size, items)) > MAX_SIZE:
        raise _limit(f"'~' makes a string longer than {MAX_SIZE:,}")
    return "".join(map(str, items))


def _literal_guard(value: Any) -> Any:
    """A list, tuple or dict written in the template: `[a, a, a]`."""
    return _check_size(value, "a literal")


def _range(*args: int) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise _limit(f"range() of {len(rng):,} items is over {MAX_RANGE:,}")
    return rng


def _guard_filter(env: ImmutableSandboxedEnvironment, name: str, check: Callable) -> None:
    """Wrap filter `name` so `check(value, *args, **kwargs)` runs before it."""
    original = env.filters[name]

    def guarded(*args: Any, **kwargs: Any) -> Any:
        first = 1 if _takes_env(original) else 0  # the value after the environment or context
        if len(args) > first:
            args = (*args[:first], _materialized(args[first]), *args[first + 1 :])
        check(*args[first:], **kwargs)
        return _check_size(original(*args, **kwargs), f"'{name}'")

    for attr in ("jinja_pass_arg",):  # keep pass_environment / pass_eval_context
        if hasattr(original, attr):
            setattr(guarded, attr, getattr(original, attr))
    env.filters[name] = guarded


def _takes_env(func: Callable) -> bool:
    return hasattr(func, "jinja_pass_arg")


_SURROGATE = re.compile("[\ud800-\udfff]")


# The filters that allocate or compute by an argument rather than by their input's size:
# `round` of an integer to -10**8 digits computes 10**(10**8).
_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "round": lambda value, precision=0, method="common": _check_width(
        precision, "'round' precision"
    ),
    "center": lambda value, width=80: _check_width(width, "'center' width"),
    "indent": lambda value, width=4, *a, **k: _check_indent(value, width),
    "tojson": lambda value, indent=None: _check_width(indent, "'tojson' indent"),
    "slice": lambda value, slices, *a: _check_width(slices, "'slice' count"),
    "batch": lambda value, linecount, *a: _check_width(linecount, "'batch' size"),
    "format": lambda value, *args, **kwargs: _check_format(
        value, (*args, *kwargs.values()), "'format'", reused=bool(kwargs)
    ),
    "replace": lambda value, old, new, count=None: _check_replace(value, old, new, count),
    "join": lambda value, d="", attribute=None: _check_join(value, d),
    "sum": lambda value, attribute=None, start=0: _check_sum(value, start),
    "wordwrap": lambda value, width=79, break_long_words=True, wrapstring=None, *a: _check_join(
        value, wrapstring or "", "'wordwrap'"
    ),
}


def _check_join(value: Any, separator: Any, what: str = "'join'") -> None:
    """`join`: the items, and the separator between each two (`wordwrap`: each line)."""
    if (
        _sized(value)
        and isinstance(separator, str)
        and _size(value) + len(value) * len(separator) > MAX_SIZE
    ):
        raise _limit(f"{what} makes a string longer than {MAX_SIZE:,}")


def _check_sum(value: Any, start: Any) -> None:
    """`sum(start=[])` adds lists one at a time: each step copies the total so far."""
    if _sized(start) and _sized(value) and len(value) * _size(value) > 100 * MAX_SIZE:
        raise _limit(f"'sum' of {len(value):,} lists is too costly")


def _check_replace(value: Any, old: Any, new: Any, count: Any = None) -> None:
    if isinstance(value, str) and isinstance(old, str) and isinstance(new, str):
        found = len(value) + 1 if old == "" else value.count(old)
        if isinstance(count, int) and count >= 0:
            found = min(found, count)
        if len(value) + found * (len(new) - len(old)) > MAX_SIZE:
            raise _limit(f"'replace' makes a string longer than {MAX_SIZE:,}")


# str and bytes methods that allocate by an argument: `'x'.ljust(10**9)`, and int's
# `to_bytes(10**9)`.
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs", "to_bytes"})


class _LimitedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with each operation that may allocate or compute without bound capped."""

    template_class = _LimitedTemplate
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_finalize, **options)
        self.globals["range"] = _range
        self.globals.pop("lipsum", None)  # generates text by the paragraph: not for pod fields
        self.filters.pop("random", None)  # same repo, same bytes: no render may draw lots
        for name, check in _FILTER_CHECKS.items():
            _guard_filter(self, name, check)
        self.filters["_gitops_sched_loop"] = _loop_guard
        self.filters["_gitops_sched_concat"] = _concat_guard
        self.filters["_gitops_sched_literal"] = _literal_guard

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _budget().tick()
        _check_binop(operator, left, right)
        return _check_size(super().call_binop(context, operator, left, right), f"'{operator}'")

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _budget().tick()
        name = getattr(__obj, "__name__", "")
        # the sandbox hands out str.format wrapped, the method as `__wrapped__`
        string = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(string, str | bytes | bytearray | int) and name in _WIDTH_METHODS:
            for arg in (*args, *kwargs.values()):
                _check_width(arg, f"'{name}' width")
            if name == "expandtabs" and not isinstance(string, int):
                _check_tabs(string, (*args, *kwargs.values(), 8)[0])
        elif isinstance(string, str):
            if name in ("format", "format_map"):
                _check_format(string, (*args, *kwargs.values()), "'format'")
            elif name == "replace" and len(args) >= 2:
                _check_replace(string, *args[:3])
            elif name == "join" and len(args) == 1:
                args = (_materialized(args[0]),)
                _check_join(args[0], string)
        result = super().call(__context, __obj, *args, **kwargs)
        return _check_size(result, f"'{name or 'call'}'")

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        try:
            return super()._parse(source, name, filename)
        except RecursionError:
            raise _limit("expression nested too deeply") from None

    def _generate(self, source: nodes.Template, *args: Any, **kwargs: Any) -> str:
        try:
            return super()._generate(_guarded_tree(source), *args, **kwargs)
        except RecursionError:
            raise _limit("expression nested too deeply") from None

    def _compile(self, source: str, filename: str) -> Any:
        try:
            return super()._compile(source, filename)
        except (RecursionError, MemoryError, SyntaxError):
            raise _limit("expression nested too deeply") from None


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would be too big before Python builds it."""
    what = f"'{operator}'"
    ints = isinstance(left, int) and isinstance(right, int)
    too_many_bits = _limit(f"{what} makes an integer of more than {MAX_INT_BITS:,} bits")
    too_long = _limit(f"{what} makes a string or list longer than {MAX_SIZE:,}")
    if operator == "**" and ints and right > 0 and abs(left) > 1:
        # at most bit_length * right bits, and at least (bit_length - 1) * right
        if right > MAX_INT_BITS or (left.bit_length() - 1) * right > MAX_INT_BITS:
            raise too_many_bits
    elif operator == "*" and ints:
        if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
            raise too_many_bits
    elif operator == "*":
        for seq, times in ((left, right), (right, left)):
            if _sized(seq) and isinstance(times, int) and _size(seq) * times > MAX_SIZE:
                raise too_long
    elif operator == "+" and _sized(left) and _sized(right):
        if _size(left) + _size(right) > MAX_SIZE:
            raise too_long
    elif operator == "%" and isinstance(left, str):
        _check_format(left, _args(right), "'%' format", reused=isinstance(right, dict))


def _check_tabs(value: str | bytes | bytearray, width: Any) -> None:
    """`expandtabs`: each tab may become `width` spaces."""
    tabs = value.count("\t") if isinstance(value, str) else value.count(b"\t")
    if isinstance(width, int) and len(value) + tabs * width > MAX_SIZE:
        raise _limit(f"'expandtabs' makes a string longer than {MAX_SIZE:,}")


def _sized(value: Any) -> bool:
    return isinstance(value, str | bytes | list | tuple)


def _is_literal(node: nodes.Node) -> bool:
    if isinstance(node, nodes.List | nodes.Dict):
        return True
    return isinstance(node, nodes.Tuple) and node.ctx == "load"  # not `for k, v in ...`


def _guarded_tree(tree: nodes.Template) -> nodes.Template:
    """Route every loop's iterable, every `~` and every list, tuple or dict literal through
    the guards (walked without recursion: the tree may be deep)."""
    stack: list[nodes.Node] = [tree]
    while stack:
        node = stack.pop()
        for field in node.fields:
            child = getattr(node, field, None)
            children = child if isinstance(child, list) else [child]
            for i, item in enumerate(children):
                if not isinstance(item, nodes.Node):
                    continue
                if isinstance(item, nodes.Concat) and not getattr(item, "_guarded", False):
                    item._guarded = True  # type: ignore[attr-defined]
                    wrapped = nodes.Filter(
                        nodes.List(item.nodes), "_gitops_sched_concat", [], [], None, None
                    ).set_lineno(item.lineno)
                    if isinstance(child, list):
                        child[i] = wrapped
                    else:
                        setattr(node, field, wrapped)
                    stack.extend(item.nodes)
                    continue
                if _is_literal(item) and not getattr(item, "_guarded", False):
                    item._guarded = True  # type: ignore[attr-defined]
                    wrapped = nodes.Filter(
                        item, "_gitops_sched_literal", [], [], None, None
                    ).set_lineno(item.lineno)
                    if isinstance(child, list):
                        child[i] = wrapped
                    else:
                        setattr(node, field, wrapped)
                stack.append(item)
        if isinstance(node, nodes.For) and not getattr(node, "_guarded", False):
            node._guarded = True  # type: ignore[attr-defined]
            node.iter = nodes.Filter(
                node.iter, "_gitops_sched_loop", [], [], None, None
            ).set_lineno(node.lineno)
    return tree


_ENV = _LimitedEnvironment(undefined=StrictUndefined, autoescape=False)
# What a plan prints as Jinja2 does (with `str`); other values take Jinja2's own path.
_PRINTABLE = (str, int, float, bool)

Render = Callable[[dict[str, Any]], str]
Plan = tuple[str | tuple[str, ...], ...]  # text, or a name and its attribute chain


def is_templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _compile(source: str) -> Render:
    """The source's render function: compiled once (cached), within the run's time."""
    with _clock().running():
        _check_source(source)
        return _compiled(source)


def _check_source(source: str) -> None:
    """Raise TemplateLimitError once the run's time is spent, or for a source too long to
    parse and compile in a fraction of a second."""
    spend()
    if len(source) > MAX_SOURCE:
        raise _limit(f"a templated string longer than {MAX_SOURCE:,} characters")
    if _too_many_tokens(source):
        raise _limit(f"a templated string of more than {MAX_TOKENS:,} tokens")


@lru_cache(maxsize=4096)
def _too_many_tokens(source: str) -> bool:
    try:
        return next(islice(_ENV.lex(source), MAX_TOKENS, None), None) is not None
    except TemplateSyntaxError:
        return False  # parsing reports it


@lru_cache(maxsize=4096)
def _compiled(source: str) -> Render:
    render = _ENV.from_string(source).render
    plan = _plan(source)
    if plan is None:
        return render
    return lambda context: _run_plan(plan, context, render)


@lru_cache(maxsize=4096)
def _plan(source: str) -> Plan | None:
    """The template as text and attribute lookups, or None when it does anything else."""
    parts: list[str | tuple[str, ...]] = []
    for output in _ENV.parse(source).body:
        if not isinstance(output, nodes.Output):
            return None
        for node in output.nodes:
            if isinstance(node, nodes.TemplateData):
                parts.append(node.data)
            elif (chain := _attribute_chain(node)) is not None:
                parts.append(chain)
            else:
                return None
    return tuple(parts)


def _attribute_chain(node: nodes.Node) -> tuple[str, ...] | None:
    """`project.quota.gpu` as ("project", "quota", "gpu"), when a dict item is what it reads.

    The sandbox reads `obj.attr` as the attribute when `obj` has one, else as the item:
    names of dict attributes (`items`, `keys`, ...) are left to Jinja2.
    """
    chain: list[str] = []
    while isinstance(node, nodes.Getattr):
        if hasattr(dict, node.attr):
            return None
        chain.append(node.attr)
        node = node.node
    if not isinstance(node, nodes.Name) or not chain:
        return None
    return (node.name, *reversed(chain))


def _run_plan(plan: Plan, context: dict[str, Any], render: Render) -> str:
    out: list[str] = []
    for part in plan:
        if isinstance(part, str):
            out.append(part)
            continue
        value: Any = context
        for name in part:
            if type(value) is not dict or name not in value:
                return render(context)  # Jinja2 decides: another type, or an undefined name
            value = value[name]
        if not isinstance(value, _PRINTABLE):
            return render(context)
        out.append(str(value))
    return "".join(out)


def renders_everywhere(source: str) -> bool:
    """True when `source` renders for every workload: text and lookups of names every
    context has (`{{ project.name }}`), so no workload's values can make it fail."""
    plan = _plan(source)
    return plan is not None and all(isinstance(part, str) or _always_defined(part) for part in plan)


def _always_defined(chain: tuple[str, ...]) -> bool:
    shape: Any = _SHAPE
    for name in chain:
        if not isinstance(shape, dict) or name not in shape:
            return False
        shape = shape[name]
    return True


def unknown_names(source: str) -> tuple[str, ...]:
    """Top-level names an expression uses that the context will not have (raises
    TemplateLimitError once the run's time is spent, or for a source past MAX_SOURCE)."""
    _check_source(source)
    return _unknown_names(source)


@lru_cache(maxsize=4096)
def _unknown_names(source: str) -> tuple[str, ...]:
    try:
        names = meta.find_undeclared_variables(_ENV.parse(source))
    except RecursionError:  # a long filter chain parses without recursion, not so this walk
        raise _limit("expression nested too deeply") from None
    return tuple(sorted(n for n in names if n not in CONTEXT_NAMES))


def context_for(cluster: Cluster | None, project: Project | None, workload: Workload) -> dict:
    """What template expressions may refer to (the README's table lists the same):

    | name                     | value                                                    |
    |--------------------------|----------------------------------------------------------|
    | `project.name`           | the workload's project                                   |
    | `project.namespace`      | its namespace (the Cluster's namespacePrefix + name)     |
    | `project.department`     | its department                                           |
    | `project.quota.gpu`      | its GPU quota (a number; none without a quota)           |
    | `workload.name`          | the workload's name                                      |
    | `workload.type`          | train, interactive or inference                          |
    | `workload.project`       | its project's name                                       |
    | `workload.replicas`      | its pod count                                            |
    | `workload.priority`      | its priority (an integer)                                |
    | `cluster.name`           | the Cluster's name                                       |
    | `cluster.schedulerName`  | the scheduler's name (what pods' schedulerName says)     |
    | `cluster.systemNamespace`| the namespace gitops-sched runs in                       |
    """
    prefix = cluster.namespace_prefix if cluster else DEFAULT_NAMESPACE_PREFIX
    project_ctx = {
        "name": workload.project,
        "namespace": prefix + workload.project,
        "department": project.department if project else "",
        "quota": {"gpu": project.quota.gpu if project else None},
    }
    workload_ctx = {
        "name": workload.name,
        "type": workload.type,
        "project": workload.project,
        "replicas": workload.replicas,
        "priority": workload.priority,
    }
    cluster_ctx = {
        "name": cluster.name if cluster else "",
        "schedulerName": cluster.scheduler_name if cluster else "gitops-sched",
        "systemNamespace": cluster.system_namespace if cluster else "gitops-sched-system",
    }
    return {"project": project_ctx, "workload": workload_ctx, "cluster": cluster_ctx}


# Every context has the same names, whatever the cluster, project and workload (or their
# absence): the context of a placeholder workload shows them.
_SHAPE = context_for(
    None,
    None,
    Workload(
        name="",
        project="",
        type="train",
        template=None,
        overrides={},
        replicas=1,
        min_available=1,
        priority=0,
        preemptible=True,
        node_group=None,
        doc=None,  # type: ignore[arg-type]  # never read: a context needs no document
    ),
)


@lru_cache(maxsize=4096)
def unknown_attributes(source: str) -> tuple[str, ...]:
    """What the expression reads of `project`, `workload` or `cluster` that no context has
    (`{{ project.nmae }}`), each as a message naming the nearest attribute there is.

    Attributes past a value (`workload.name.upper`) and names the template assigns itself
    are left to rendering; the tree is walked without recursion (it may be deep)."""
    assigned: set[str] = set()
    chains: list[tuple[str, ...]] = []
    stack: list[nodes.Node] = [_ENV.parse(source)]
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.Name) and node.ctx in ("store", "param"):
            assigned.add(node.name)
        elif (chain := _lookup_chain(node)) is not None:
            chains.append(chain)
        stack.extend(reversed(list(node.iter_child_nodes())))  # in source order
    found = (_missing(chain) for chain in chains if chain[0] not in assigned)
    return tuple(dict.fromkeys(message for message in found if message))


def _lookup_chain(node: nodes.Node) -> tuple[str, ...] | None:
    """`project.quota.gpu` (or `project["quota"]`) as ("project", "quota", "gpu")."""
    parts: list[str] = []
    while True:
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
        elif (
            isinstance(node, nodes.Getitem)
            and isinstance(node.arg, nodes.Const)
            and isinstance(node.arg.value, str)
        ):
            parts.append(node.arg.value)
        else:
            break
        node = node.node
    if parts and isinstance(node, nodes.Name) and node.name in CONTEXT_NAMES:
        return (node.name, *reversed(parts))
    return None


def _missing(chain: tuple[str, ...]) -> str | None:
    """Where `chain` leaves the context's shape: `project has no attribute 'nmae'; did you
    mean 'name'?` (None: every part exists, or the rest is read from a value)."""
    shape: Any = _SHAPE
    for depth, name in enumerate(chain):
        if not isinstance(shape, dict):
            return None
        if name not in shape:
            if hasattr(dict, name):  # the sandbox reads a dict's own methods (`items`)
                return None
            known = sorted(shape)
            guess = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean '{guess[0]}'?" if guess else f" (it has: {', '.join(known)})"
            return f"{'.'.join(chain[:depth])} has no attribute '{name}'{hint}"
        shape = shape[name]
    return None


def render_value(value: Any, context: dict[str, Any]) -> Any:
    """Render every templated string inside `value` (lists and dicts walked)."""
    if isinstance(value, dict):
        return {k: render_value(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, context) for v in value]
    if is_templated(value):
        return _compile(value)(context)
    return value


__all__ = [
    "CONTEXT_NAMES",
    "TemplateError",
    "TemplateLimitError",
    "TemplateTimeError",
    "context_for",
    "is_templated",
    "render_value",
    "renders_everywhere",
    "spend",
    "time_budget",
    "unknown_attributes",
    "unknown_names",
]

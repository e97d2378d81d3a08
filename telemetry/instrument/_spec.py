"""What the decorator decides once, at decoration time, about a tool.

:class:`ToolOptions` is the one definition of what a user may say about a tool; every entry point
(``instrument_tool``, ``telemetry.mcp.tool``, ``telemetry.mcp.instrument_server``, the framework
integrations) builds one and hands it to :func:`build_spec`, so a new option is added here alone.
Everything a call needs that does not depend on the call's arguments lives in :class:`ToolSpec`:
the span name, the static span attributes, the hints, the bound signature and the set of outcome
codes allowed on metric labels. A call then does the least possible work.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import conventions as c
from ..exceptions import ConfigurationError
from ._classify import ResultClass, classifier_for

ReadbackFn = Callable[[Any, Any], Any]
"""``readback(call, result)`` returns True/False, a ``Readback`` value, or None (skipped)."""
OutcomeFn = Callable[[Any, Any], "str | None"]
"""``outcome(call, result)`` returns an outcome code, or None to keep the derived one."""

READBACK_TIMEOUT_SECONDS = math.inf
"""By default a read-back runs unbounded in the tool's own thread, as the tool's own code would:
a read-back may hold what only that thread can use (a ``sqlite3`` connection made there, a lock the
tool holds), and a thread per call costs more than the call. A tool that reads a source which can
hang says how long to wait (``readback_timeout``)."""

_NO_AGENT = object()
"""No agent context is this one: the agent-attributes cache starts out matching none."""

_KIND_DEFAULT_HINTS = {
    # kind: (read_only, destructive, idempotent)
    c.KIND_READ: (True, False, True),
    c.KIND_WRITE: (False, True, False),
    c.KIND_SEND: (False, True, False),
    c.KIND_DELEGATE: (False, False, False),
}


MAX_TOOL_NAME_LENGTH = 128
"""Longest tool name: it is a label on every series of the tool (and MCP's limit for names)."""
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,%d}" % MAX_TOOL_NAME_LENGTH)
_OUTCOME_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.:/-]+")


@dataclass(frozen=True)
class ToolOptions:
    """Everything a user may declare about a tool; see :func:`telemetry.instrument_tool`.

    Frozen and passed along whole, so the entry points never keep parameter lists in step by
    hand. ``None`` means "not said": the kind's default (or an integration's inference) applies.
    """

    name: str | None = None
    kind: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    readback: ReadbackFn | None = None
    outcome: OutcomeFn | None = None
    outcomes: Iterable[str] = ()
    record_arguments: Iterable[str] = ()
    exceptions: Mapping[type[BaseException], str] | None = None
    readback_timeout: float | None = None

    @classmethod
    def names(cls) -> frozenset[str]:
        """The option names, for entry points that take options as a mapping."""
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], *, where: str) -> ToolOptions:
        """Options from keyword arguments or a mapping; an unknown name is a ConfigurationError."""
        unknown = sorted(set(options) - cls.names())
        if unknown:
            raise ConfigurationError(
                f"{where}: {', '.join(map(repr, unknown))} {'is not an option' if len(unknown) == 1 else 'are not options'} "
                f"of instrument_tool; the options are {', '.join(sorted(cls.names()))}"
            )
        return cls(**options)

    def replace(self, **changes: Any) -> ToolOptions:
        """A copy with ``changes`` applied (for entry points that decide a name or hints)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ToolSpec:
    """A decorated tool's fixed facts; see :func:`telemetry.instrument_tool` for the meaning."""

    name: str
    kind: str
    read_only: bool
    destructive: bool
    idempotent: bool
    readback: ReadbackFn | None
    outcome: OutcomeFn | None
    outcomes: frozenset[str]
    record_arguments: tuple[str, ...]
    signature: inspect.Signature
    exceptions: Mapping[type[BaseException], str] = field(default_factory=dict)
    """Exception class to outcome code: such an exception is transport ``ok`` with that outcome."""
    readback_timeout: float = field(default=0.0)
    """Seconds the caller waits for the read-back (run on a telemetry thread); ``math.inf``: no
    bound, the read-back runs in the tool's own thread. Set from :data:`READBACK_TIMEOUT_SECONDS`
    when the options leave it out; meaningless without a read-back."""
    span_name: str = field(init=False)
    static_attributes: dict[str, Any] = field(init=False)
    label_outcomes: frozenset[str] = field(init=False)
    classify: Callable[[Any], ResultClass] = field(init=False)
    agent_attributes: tuple[object, dict[str, Any]] = field(init=False, compare=False, repr=False)
    """The start attributes last built inside an agent block: (that AgentContext, attributes).

    The one part of a spec that changes after decoration: a cache the recorder replaces whole
    (see ``_recorder._start_attributes``), so a reader never sees one context's attributes
    paired with another context."""

    def __post_init__(self) -> None:
        # Decided from the return annotation: a `-> str` tool never pays for envelope checks.
        object.__setattr__(self, "classify", classifier_for(self.signature.return_annotation))
        object.__setattr__(self, "span_name", c.SPAN_NAME_PREFIX + self.name)
        object.__setattr__(
            self,
            "static_attributes",
            {
                c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL,
                c.GEN_AI_TOOL_NAME: self.name,
                c.TOOL_KIND: self.kind,
                c.TOOL_READ_ONLY: self.read_only,
                c.TOOL_DESTRUCTIVE: self.destructive,
                c.TOOL_IDEMPOTENT: self.idempotent,
            },
        )
        object.__setattr__(self, "label_outcomes", c.OUTCOMES | self.outcomes | frozenset(self.exceptions.values()))
        object.__setattr__(self, "agent_attributes", (_NO_AGENT, self.static_attributes))

    def keep_agent_attributes(self, agent: object, attributes: dict[str, Any]) -> None:
        """Keep ``attributes`` as the start attributes of calls made while ``agent`` is current."""
        object.__setattr__(self, "agent_attributes", (agent, attributes))

    def exception_outcome(self, exc: BaseException) -> str | None:
        """The outcome declared for ``exc``'s class or its nearest base class, or None."""
        if not self.exceptions:
            return None
        for cls in type(exc).__mro__:
            code = self.exceptions.get(cls)
            if code is not None:
                return code
        return None

    def outcome_label(self, outcome: str) -> str:
        """The metric label for ``outcome``: itself when known, else ``other``."""
        return outcome if outcome in self.label_outcomes else c.OUTCOME_OTHER


def _check_target(func: Any) -> None:
    """Refuse what is not a function, saying what to decorate instead."""
    if inspect.isclass(func):
        raise ConfigurationError(
            f"instrument_tool decorates functions, and {func.__qualname__} is a class: decorate the method that "
            f"does the work (put @instrument_tool above its def), or a function that calls it"
        )
    if not (inspect.isfunction(func) or inspect.ismethod(func) or inspect.isbuiltin(func)
            or isinstance(func, functools.partial)):
        raise ConfigurationError(
            f"instrument_tool decorates functions, got a {type(func).__name__} object; decorate a def (for a "
            f"callable object, its __call__ method or a function that calls it)"
        )


def _check_name(tool_name: Any, given: bool) -> str:
    if not isinstance(tool_name, str) or not tool_name:
        raise ConfigurationError(f"instrument_tool needs a non-empty tool name, got {tool_name!r}; pass name=")
    if _TOOL_NAME.fullmatch(tool_name):
        return tool_name
    origin = "name=" if given else "the function's name"
    suggestion = _NOT_NAME_CHARS.sub("_", tool_name).strip("_")[:MAX_TOOL_NAME_LENGTH] or "my_tool"
    shown = tool_name if len(tool_name) <= 60 else tool_name[:57] + "..."
    raise ConfigurationError(
        f"tool name {shown!r} ({origin}, {len(tool_name)} characters) is not usable as a metric label: a tool name "
        f"is 1 to {MAX_TOOL_NAME_LENGTH} letters, digits and _ . : / -; pass name={suggestion!r}"
    )


def _check_hints(tool_name: str, kind: str, read_only: bool | None, destructive: bool | None) -> None:
    """Refuse hints that contradict the kind or each other (a read that destroys, a write that is read-only)."""
    if kind == c.KIND_READ and read_only is False:
        raise ConfigurationError(f"tool {tool_name!r}: kind='read' contradicts read_only=False; use kind='write'")
    if kind != c.KIND_READ and read_only:
        raise ConfigurationError(
            f"tool {tool_name!r}: kind={kind!r} contradicts read_only=True (a {kind} changes something); "
            f"use kind='read' for a tool that only reads, or drop read_only"
        )
    if destructive and (kind == c.KIND_READ or read_only):
        raise ConfigurationError(
            f"tool {tool_name!r}: destructive=True contradicts a read-only tool; drop destructive, or declare "
            f"kind='write' if it does change something"
        )


def _check_outcomes(tool_name: str, outcomes: Iterable[str]) -> frozenset[str]:
    if isinstance(outcomes, str):
        raise ConfigurationError(f"tool {tool_name!r}: outcomes takes a list of codes, not one string: pass [{outcomes!r}]")
    declared = frozenset(outcomes)
    for code in declared:
        if not isinstance(code, str) or not _OUTCOME_CODE.fullmatch(code):
            suggestion = re.sub(r"[^a-z0-9]+", "_", str(code).lower()).strip("_")[:64] or "my_outcome"
            if not suggestion[0].isalpha():
                suggestion = "outcome_" + suggestion[:56]
            raise ConfigurationError(
                f"tool {tool_name!r}: declared outcome {code!r} is not a short snake_case code (a lower-case letter, "
                f"then up to 63 lower-case letters, digits or _); it becomes a metric label: use {suggestion!r}"
            )
    return declared


def build_spec(func: Callable[..., Any], options: ToolOptions) -> ToolSpec:
    """Validate the decorator's arguments (raising :class:`ConfigurationError`) and build a spec."""
    name, kind, read_only = options.name, options.kind, options.read_only
    readback, outcome = options.readback, options.outcome
    outcomes, record_arguments = options.outcomes, options.record_arguments
    destructive, idempotent = options.destructive, options.idempotent
    _check_target(func)
    if kind is None:
        kind = c.KIND_READ if read_only else c.KIND_WRITE
    if kind not in c.KINDS:
        raise ConfigurationError(f"kind={kind!r} is not one of {', '.join(c.KINDS)}")
    label = str(name if isinstance(name, str) else getattr(func, "__name__", "?"))[:60]
    _check_hints(label, kind, read_only, destructive)
    default_ro, default_destructive, default_idempotent = _KIND_DEFAULT_HINTS[kind]
    read_only = default_ro if read_only is None else bool(read_only)
    if read_only and readback is not None:
        raise ConfigurationError(f"tool {label!r} is read-only: a readback applies only to writes")
    for what, fn in (("readback", readback), ("outcome", outcome)):
        if fn is not None and not callable(fn):
            raise ConfigurationError(f"tool {label!r}: {what} must be callable(call, result), got {fn!r}")
    declared = _check_outcomes(label, outcomes)
    exceptions = _exception_outcomes(label, options.exceptions)
    readback_timeout = _check_readback_timeout(label, options.readback_timeout, readback)
    tool_name = _check_name(name if name is not None else getattr(func, "__name__", None), name is not None)
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"instrument_tool cannot read the signature of {func!r}: {exc}") from exc
    recorded = tuple(record_arguments)
    if isinstance(record_arguments, str):
        raise ConfigurationError("record_arguments takes a list of argument names, not one string")
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    unknown = [n for n in recorded if n not in signature.parameters]
    if unknown and not takes_kwargs:
        warnings.warn(
            f"instrument_tool({tool_name!r}): record_arguments names {unknown} that are not "
            f"parameters of {tool_name}{signature}; they will never be recorded",
            stacklevel=4,
        )
    return ToolSpec(
        name=tool_name,
        kind=kind,
        read_only=read_only,
        destructive=default_destructive if destructive is None else bool(destructive),
        idempotent=default_idempotent if idempotent is None else bool(idempotent),
        readback=readback,
        outcome=outcome,
        outcomes=declared,
        record_arguments=recorded,
        signature=signature,
        exceptions=exceptions,
        readback_timeout=readback_timeout,
    )


def _check_readback_timeout(tool_name: str, timeout: Any, readback: ReadbackFn | None) -> float:
    """``readback_timeout``: seconds above 0 (``math.inf`` for none), only beside a ``readback``."""
    if timeout is None:
        return READBACK_TIMEOUT_SECONDS
    if readback is None:
        raise ConfigurationError(f"tool {tool_name!r}: readback_timeout={timeout!r} without a readback bounds "
                                 "nothing; give readback= too, or drop readback_timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:  # nan fails > 0
        raise ConfigurationError(f"tool {tool_name!r}: readback_timeout must be a number of seconds above 0 "
                                 f"(math.inf: no bound, the read-back runs in the tool's thread), got {timeout!r}")
    return float(timeout)


def _exception_outcomes(tool_name: str, declared: Mapping[type[BaseException], str] | None) -> dict[type[BaseException], str]:
    """Validate ``exceptions={ExcClass: "outcome_code"}``: classes map to short outcome codes.

    ``ok`` is refused: an exception that means success is a tool that should return instead.
    """
    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise ConfigurationError(
            f"tool {tool_name!r}: exceptions takes a mapping of exception class to outcome code, got {declared!r}"
        )
    checked: dict[type[BaseException], str] = {}
    for cls, code in declared.items():
        if not isinstance(cls, type) or not issubclass(cls, BaseException):
            raise ConfigurationError(f"tool {tool_name!r}: exceptions key {cls!r} is not an exception class")
        if not isinstance(code, str) or not code or len(code) > 64 or code == c.OUTCOME_OK:
            raise ConfigurationError(
                f"tool {tool_name!r}: exceptions[{cls.__name__}] = {code!r} must be a short non-empty outcome "
                f"code other than {c.OUTCOME_OK!r} (for example {c.OUTCOME_TOOL_ERROR!r})"
            )
        checked[cls] = code
    return checked

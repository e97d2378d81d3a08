"""What the decorator decides once, at decoration time, about a tool.

Everything a call needs that does not depend on the call's arguments lives in :class:`ToolSpec`:
the span name, the static span attributes, the hints, the bound signature and the set of outcome
codes allowed on metric labels. A call then does the least possible work.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import conventions as c
from ..exceptions import ConfigurationError

ReadbackFn = Callable[[Any, Any], Any]
"""``readback(call, result)`` returns True/False, a ``Readback`` value, or None (skipped)."""
OutcomeFn = Callable[[Any, Any], "str | None"]
"""``outcome(call, result)`` returns an outcome code, or None to keep the derived one."""

_KIND_DEFAULT_HINTS = {
    # kind: (read_only, destructive, idempotent)
    c.KIND_READ: (True, False, True),
    c.KIND_WRITE: (False, True, False),
    c.KIND_SEND: (False, True, False),
    c.KIND_DELEGATE: (False, False, False),
}


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
    span_name: str = field(init=False)
    static_attributes: dict[str, Any] = field(init=False)
    label_outcomes: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
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
        object.__setattr__(self, "label_outcomes", c.OUTCOMES | self.outcomes)

    def outcome_label(self, outcome: str) -> str:
        """The metric label for ``outcome``: itself when known, else ``other``."""
        return outcome if outcome in self.label_outcomes else c.OUTCOME_OTHER


def build_spec(
    func: Callable[..., Any],
    *,
    name: str | None,
    kind: str | None,
    read_only: bool | None,
    destructive: bool | None,
    idempotent: bool | None,
    readback: ReadbackFn | None,
    outcome: OutcomeFn | None,
    outcomes: Iterable[str],
    record_arguments: Iterable[str],
) -> ToolSpec:
    """Validate the decorator's arguments (raising :class:`ConfigurationError`) and build a spec."""
    tool_name = name if name is not None else getattr(func, "__name__", None)
    if not isinstance(tool_name, str) or not tool_name:
        raise ConfigurationError(f"instrument_tool needs a non-empty tool name, got {tool_name!r}; pass name=")
    if kind is None:
        kind = c.KIND_READ if read_only else c.KIND_WRITE
    if kind not in c.KINDS:
        raise ConfigurationError(f"kind={kind!r} is not one of {', '.join(c.KINDS)}")
    default_ro, default_destructive, default_idempotent = _KIND_DEFAULT_HINTS[kind]
    read_only = default_ro if read_only is None else bool(read_only)
    if kind == c.KIND_READ and not read_only:
        raise ConfigurationError(f"tool {tool_name!r}: kind='read' contradicts read_only=False")
    if read_only and readback is not None:
        raise ConfigurationError(f"tool {tool_name!r} is read-only: a readback applies only to writes")
    for label, fn in (("readback", readback), ("outcome", outcome)):
        if fn is not None and not callable(fn):
            raise ConfigurationError(f"tool {tool_name!r}: {label} must be callable(call, result), got {fn!r}")
    declared = frozenset(outcomes)
    for code in declared:
        if not isinstance(code, str) or not code or len(code) > 64:
            raise ConfigurationError(f"tool {tool_name!r}: declared outcome {code!r} must be a short non-empty string")
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
    )

"""One tool call in flight: what the tool (and its guards) can say about it while it runs.

``telemetry.current_call()`` returns the :class:`Call` of the innermost instrumented tool call,
so code inside a tool can set the outcome, the read-back and domain attributes explicitly
(guards do this to put ``state.version.current`` or ``delegation.hop`` on the span). Outside an
instrumented call, or when telemetry is not configured, it returns a do-nothing call, so tool
code never needs to check.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from contextvars import ContextVar
from enum import Enum
from types import MappingProxyType
from typing import Any, NoReturn

from opentelemetry.trace import Span

from .. import conventions as c
from ._classify import readback_value
from ._spec import ToolSpec


class Readback(str, Enum):
    """Explicit read-back results, for a ``readback`` callable or ``Call.set_readback``."""

    MATCH = c.READBACK_MATCH
    MISMATCH = c.READBACK_MISMATCH
    SKIPPED = c.READBACK_SKIPPED
    ERROR = c.READBACK_ERROR
    NOT_APPLICABLE = c.READBACK_NOT_APPLICABLE


class Call:
    """The state of one instrumented call; created by the decorator, read by its callbacks.

    ``arguments`` binds the call's arguments to the tool's signature (defaults applied) the
    first time it is read, so a tool whose callbacks never look pays nothing for it.
    """

    __slots__ = (
        "spec",
        "args",
        "kwargs",
        "span",
        "started",
        "outcome",
        "readback",
        "waivers",
        "replayed",
        "attributes",
        "_arguments",
    )

    def __init__(self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any], span: Span | None) -> None:
        self.spec = spec
        self.args = args
        self.kwargs = kwargs
        self.span = span
        self.started = 0.0
        self.outcome: str | None = None
        self.readback: str | None = None
        self.waivers = 0
        self.replayed = False
        self.attributes: dict[str, Any] = {}
        """Domain attributes set during the call, put on the span in one batch when it ends."""
        self._arguments: dict[str, Any] | None = None

    @property
    def tool_name(self) -> str:
        """The tool's name as it appears on spans and metric labels."""
        return self.spec.name

    def is_recording(self) -> bool:
        """True inside an instrumented call; False for :data:`NO_CALL` (as a span's ``is_recording``)."""
        return True

    @property
    def arguments(self) -> dict[str, Any]:
        """The call's arguments by parameter name, defaults included."""
        if self._arguments is None:
            bound = self.spec.signature.bind(*self.args, **self.kwargs)
            bound.apply_defaults()
            self._arguments = dict(bound.arguments)
        return self._arguments

    def set_outcome(self, outcome: str) -> None:
        """Declare the call's outcome (``ok`` or a code); overrides what the result implies."""
        self.outcome = outcome

    def set_readback(self, readback: bool | Readback | str | None) -> None:
        """Declare the read-back result (``True`` match, ``False`` mismatch)."""
        self.readback = readback_value(readback)

    def set_attribute(self, key: str, value: Any) -> None:
        """Put a domain attribute on the call's span (``None`` values are left out).

        Attributes are collected and set on the span together with the triad when the call
        ends (one pass through the SDK's attribute validation instead of one per call here);
        a later value for the same key wins.
        """
        if self.span is not None and value is not None:
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Put several domain attributes on the span at once (see :meth:`set_attribute`)."""
        if self.span is not None:
            for key, value in attributes.items():
                if value is not None:
                    self.attributes[key] = value

    def add_waivers(self, count: int) -> None:
        """Count ``count`` constraint waivers made by this call (``tool_constraint_waivers_total``)."""
        self.waivers += count

    def mark_replayed(self) -> None:
        """Say this call was answered from a stored outcome (``tool_idempotent_replays_total``)."""
        self.replayed = True


def _no_tool() -> None:
    """The signature of the call outside any tool: no arguments."""


class _NoCall(Call):
    """The call outside any instrumented tool: immutable, every method a no-op.

    One object shared by every thread and task, like OpenTelemetry's ``INVALID_SPAN``; since
    nothing can change it, nothing needs resetting and no thread sees another's leftovers.
    Setters still check their argument (a bad read-back value raises as it would in a tool).
    """

    __slots__ = ()

    def __init__(self) -> None:
        spec = ToolSpec(
            name="", kind="read", read_only=True, destructive=False, idempotent=True, readback=None,
            outcome=None, outcomes=frozenset(), record_arguments=(), signature=inspect.signature(_no_tool),
        )
        for name, value in (
            ("spec", spec), ("args", ()), ("kwargs", MappingProxyType({})), ("span", None), ("started", 0.0),
            ("outcome", None), ("readback", None), ("waivers", 0), ("replayed", False),
            ("attributes", MappingProxyType({})), ("_arguments", None),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"the call outside any tool cannot be changed (setting {name!r}); use its methods")

    def is_recording(self) -> bool:
        return False

    @property
    def arguments(self) -> dict[str, Any]:
        return {}

    def set_outcome(self, outcome: str) -> None:
        pass

    def set_readback(self, readback: bool | Readback | str | None) -> None:
        readback_value(readback)

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def add_waivers(self, count: int) -> None:
        pass

    def mark_replayed(self) -> None:
        pass


NO_CALL: Call = _NoCall()
"""What ``current_call()`` returns outside an instrumented call: immutable, every method harmless."""

_current: ContextVar[Call] = ContextVar("outcome_telemetry_call", default=NO_CALL)


def current_call() -> Call:
    """The innermost instrumented call running in this context, or :data:`NO_CALL`."""
    return _current.get()

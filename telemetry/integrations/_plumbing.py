"""Plumbing the framework integrations and ``telemetry.mcp`` share; not an API for users.

- :func:`replace_attribute` / :func:`restore_attributes`: change a framework object's attribute
  in place and put exactly what was there back (every ``uninstrument``);
- :func:`record_refused`: record a call the framework answered before the tool ran (arguments
  refused by its validation, a call paused for approval), with the tool's own name and hints;
- :func:`passed_through`: whether an exception came out of the instrumented tool (which recorded
  it already) or from the framework around it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from .. import conventions as c
from ..instrument import SPEC_ATTRIBUTE, ToolOptions, ToolSpec, instrument_with
from ..runtime import _containment as _safe

__all__ = ["passed_through", "record_refused", "replace_attribute", "restore_attributes", "spec_of", "was_replaced"]


# --- putting things back: uninstrument(...) -------------------------------------------------

_ORIGINALS = "__outcome_telemetry_originals__"
_ABSENT = object()


def replace_attribute(obj: Any, name: str, value: Any) -> None:
    """Set ``obj.name = value`` past pydantic's and dataclasses' field handling, keeping the original.

    The first value an attribute had (or that it had none on the instance, only on the class) is
    remembered on the object, so :func:`restore_attributes` puts back exactly what was there.
    """
    own = vars(obj)
    originals = own.get(_ORIGINALS)
    if originals is None:
        originals = {}
        object.__setattr__(obj, _ORIGINALS, originals)
    if name not in originals:
        originals[name] = own.get(name, _ABSENT)
    object.__setattr__(obj, name, value)


def restore_attributes(obj: Any) -> bool:
    """Put back every attribute :func:`replace_attribute` changed on ``obj``; False when none was."""
    own = vars(obj)
    originals = own.pop(_ORIGINALS, None)
    if not originals:
        return False
    for name, value in originals.items():
        if value is _ABSENT:
            own.pop(name, None)
        else:
            object.__setattr__(obj, name, value)
    return True


def was_replaced(obj: Any, name: str) -> bool:
    """True when :func:`replace_attribute` changed ``obj.name`` and it was not restored since."""
    originals = vars(obj).get(_ORIGINALS) if hasattr(obj, "__dict__") else None
    return isinstance(originals, dict) and name in originals


# --- calls the framework refused before they reached the tool ------------------------------


def _raise(exc: BaseException) -> NoReturn:
    raise exc


_refusers: dict[tuple[int, str], tuple[ToolSpec, Callable[[BaseException], Any]]] = {}


def passed_through(exc: BaseException, function: Any) -> bool:
    """True when ``exc`` was raised inside ``function`` (its frame is in the traceback).

    Tells a call the framework refused before the tool ran (no span yet) from an exception the
    instrumented tool raised itself (its span recorded it already).
    """
    code = getattr(function, "__code__", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def spec_of(func: Any) -> ToolSpec | None:
    """The :class:`ToolSpec` of an instrumented function, or None."""
    spec = getattr(func, SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, ToolSpec) else None


def record_refused(spec: ToolSpec, exc: BaseException, outcome: str) -> None:
    """Record a call of tool ``spec`` that the framework answered before the tool ran.

    The framework validated the model's arguments and refused them (``invalid_argument``), or
    paused the call for a human (``approval_required``): the tool body never ran, yet the model
    called it and was told something. The span and the counters say so: transport ``ok``, that
    outcome, ``error.type`` the framework's exception, with the tool's name, kind and hints. The
    exception itself is left as it was (its traceback and context put back) and never raised
    here; a failure to record is contained.
    """
    key = (id(spec), outcome)
    found = _refusers.get(key)
    if found is None or found[0] is not spec:
        options = ToolOptions(
            name=spec.name, kind=spec.kind, read_only=spec.read_only, destructive=spec.destructive,
            idempotent=spec.idempotent, outcomes=spec.outcomes, exceptions={BaseException: outcome},
        )
        try:
            found = (spec, instrument_with(_raise, options))
        except Exception as problem:  # pragma: no cover - the spec was valid once already
            _safe.report(c.STAGE_SPAN, "recording a refused call", problem)
            return
        _refusers[key] = found
    traceback, context = exc.__traceback__, exc.__context__
    try:
        found[1](exc)
    except BaseException as raised:
        if raised is not exc:  # pragma: no cover - the recorder contains its own failures
            _safe.report(c.STAGE_SPAN, "recording a refused call", raised)
    finally:
        exc.__traceback__, exc.__context__ = traceback, context

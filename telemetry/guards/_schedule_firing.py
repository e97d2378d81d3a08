"""Firing a stored send: what a guarded tool declares, finding it again, rebuilding its call,
and judging how the fire ended. Kept apart from :mod:`._scheduled`, which decides when to fire."""

from __future__ import annotations

import contextvars
import importlib
import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import classify_result
from . import _schedule_store as rows
from . import _validation as validation

__all__ = ["MAX_REVIEW_SECONDS", "SCHEDULE_ATTRIBUTE", "Firing", "ScheduleSpec", "by_name", "call_arguments",
           "firing", "review_window", "verdict"]

MAX_REVIEW_SECONDS: Final = 30 * 24 * 3600.0
"""The longest review window a tool may declare (30 days)."""

SCHEDULE_ATTRIBUTE: Final = "__outcome_telemetry_schedule__"
"""Set on every function :meth:`ScheduledSends.schedule_send` guards (``functools.wraps`` copies
it onto ``@instrument_tool``'s wrapper): its :class:`ScheduleSpec`, for firing and for the audit."""


@dataclass(frozen=True)
class ScheduleSpec:
    """What a scheduled-send tool declares: where it lives, its policy and its review window."""

    scope: str
    """``module:qualname`` of the guarded function: how a firing process finds it."""
    policy_task_id: str
    review_seconds: float
    agent_parameter: str


@dataclass
class Firing:
    """One fire in progress, seen by the guard inside the tool's own span."""

    row: Mapping[str, Any]
    admitted: bool = False
    verdict: dict[str, Any] | None = None


firing: contextvars.ContextVar[Firing | None] = contextvars.ContextVar("outcome_telemetry_firing", default=None)


def review_window(value: Any) -> float:
    """``value`` as a review window in seconds, or a :class:`ConfigurationError` naming it."""
    try:
        valid = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) \
            and 0 <= value <= MAX_REVIEW_SECONDS
    except (OverflowError, TypeError):
        valid = False
    if not valid:
        raise ConfigurationError(f"review_seconds must be a number of seconds from 0 to {MAX_REVIEW_SECONDS:g}, got "
                                 f"{validation.show(value)}")
    return float(value)


def by_name(scope: str) -> Callable[..., Any] | None:
    """The scheduled-send tool importable as ``scope`` (``module:qualname``), or None."""
    module_name, _, qualname = scope.partition(":")
    if "<locals>" in qualname:
        return None
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    spec = getattr(obj, SCHEDULE_ATTRIBUTE, None)
    return obj if isinstance(spec, ScheduleSpec) and spec.scope == scope and callable(obj) else None


def call_arguments(signature: inspect.Signature, stored: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The stored bound arguments as ``(args, kwargs)`` for ``signature``."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if name not in stored:
            continue
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            args.append(stored[name])
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            args.extend(stored[name])
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            kwargs.update(stored[name])
        else:
            kwargs[name] = stored[name]
    return args, kwargs


def verdict(firing: Firing, result: Any, failure: BaseException | None) -> tuple[str, str | None, str | None]:
    """``(status, outcome, stored result)`` of a fire."""
    if firing.admitted:
        if failure is not None:
            return rows.FAILED, type(failure).__name__, None
        outcome = classify_result(result).outcome
        try:
            stored = json.dumps(result, sort_keys=True, default=str)
        except (TypeError, ValueError, RecursionError):
            stored = None
        return rows.FIRED, outcome, stored
    verdict = firing.verdict
    if verdict is None or verdict.get(c.ENVELOPE_ERROR) == c.OUTCOME_RATE_LIMITED:
        return rows.SCHEDULED, None, None  # not checked (busy store, or failed before the check): a later pass retries
    return rows.REFUSED, str(verdict.get(c.ENVELOPE_ERROR)), json.dumps(verdict, sort_keys=True, default=str)



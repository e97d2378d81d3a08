"""A value's verdict: the team's registered shapes first, then the built-in rules.

Both the decorator (a live result) and the readers of recorded results (forensics,
``observe_tool_spans``) decide through :func:`result_class`, so a shape registered once is read
the same way live and offline. A shape that raises is reported through ``report`` and the
built-in rules decide: classification never raises into its caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import conventions as c
from . import _shapes
from ._rules import OK, ResultClass, builtin_result_class

__all__ = ["Report", "registered_result_class", "result_class"]

Report = Callable[[BaseException], None]
"""Told about a registered shape that raised (the decorator counts it; offline readers count it)."""


def _ignore(exc: BaseException) -> None:
    return None


def registered_result_class(result: Any, report: Report = _ignore) -> ResultClass | None:
    """The verdict of the newest registered shape that matches ``result``, or None (none matched)."""
    if not _shapes.registered:
        return None
    try:
        found = _shapes.match(result)
    except Exception as exc:  # a team's predicate or classifier raised: the built-in rules decide
        report(exc)
        return None
    if found is None:
        return None
    _, code = found
    return OK if code is None or code == c.OUTCOME_OK else ResultClass(c.TRANSPORT_OK, code, None)


def result_class(result: Any, report: Report = _ignore) -> ResultClass:
    """Classify ``result``: registered shapes first (newest first), then the built-in rules."""
    if _shapes.registered:
        found = registered_result_class(result, report)
        if found is not None:
            return found
    return builtin_result_class(result)

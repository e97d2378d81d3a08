"""The team's own result shapes: declared once, consulted before the built-in rules.

Registration takes a lock and publishes a new tuple (copy on write); a call reads the module
attribute :data:`registered` once, so lookups take no lock and never see a half-made list. With
nothing registered the per-call cost is one attribute read and a truth test. Every registration
and removal also bumps :data:`generation`, so a verdict remembered under the shapes of before
(:func:`telemetry.envelopes.read_recorded` remembers the verdicts of short texts) is judged anew.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..exceptions import ConfigurationError

__all__ = ["ShapeClassifier", "generation", "match", "register_result_shape", "registered"]

ShapeClassifier = Callable[[Any], "str | None"]
"""``classify(result)`` returns None when the result reports success, else an outcome code."""

_Entry = tuple[Callable[[Any], bool], ShapeClassifier, object]

registered: tuple[_Entry, ...] = ()
"""Newest first: (matches, classify, token). Replaced whole under :data:`_lock`, never mutated."""

generation = 0
"""Bumped (under :data:`_lock`, after :data:`registered` is replaced) by every registration and
removal: a verdict remembered while it had another value may no longer be what the shapes say."""

_lock = threading.Lock()


def _isinstance_of(kind: type) -> Callable[[Any], bool]:
    def matches(result: Any) -> bool:
        return isinstance(result, kind)

    return matches


def register_result_shape(shape: type | Callable[[Any], bool], classify: ShapeClassifier) -> Callable[[], None]:
    """Declare a result type (or a predicate over results) and how to read its outcome, once.

    ``shape`` is a class (results that are instances of it match) or a predicate
    ``shape(result) -> bool``. ``classify(result)`` returns None when the result reports success
    and an outcome code when it reports a failure; transport stays ``ok``. A registered shape
    wins over the built-in rules, the newest registration over older ones, and the per-tool
    ``outcome=`` callable still has the last word. A predicate or classifier that raises is
    logged once and the built-in rules decide. Returns a function that removes the registration::

        @dataclass
        class FuncToolResult:
            success: int
            error: str | None = None
            reason: str | None = None

        telemetry.register_result_shape(
            FuncToolResult, lambda r: None if r.success else (r.reason or "tool_error")
        )
    """
    if isinstance(shape, type):
        matches = _isinstance_of(shape)
    elif callable(shape):
        matches = shape
    else:
        raise ConfigurationError(
            f"register_result_shape takes a class or a predicate result -> bool, got {shape!r}"
        )
    if not callable(classify):
        raise ConfigurationError(
            f"register_result_shape needs classify(result) -> None or an outcome code, got {classify!r}"
        )
    token = object()
    global registered, generation
    with _lock:
        registered = ((matches, classify, token), *registered)
        generation += 1

    def unregister() -> None:
        global registered, generation
        with _lock:
            registered = tuple(entry for entry in registered if entry[2] is not token)
            generation += 1

    return unregister


def match(result: Any) -> tuple[bool, str | None] | None:
    """``(True, code or None)`` from the newest shape that matches ``result``; None if none does.

    Raises whatever a predicate or classifier raised, and :class:`TypeError` for a classifier
    that returned something other than None or a non-empty string (the caller contains both).
    """
    for matches, classify, _ in registered:
        if matches(result):
            code = classify(result)
            if code is not None and (not isinstance(code, str) or not code):
                raise TypeError(f"a registered result shape's classify returned {code!r}; return None or an outcome code")
            return True, code
    return None

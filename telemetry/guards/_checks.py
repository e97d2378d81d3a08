"""Input checks shared by the guards: bad input becomes an ``invalid_argument`` envelope.

A guard validates everything before it touches the database, so a bad call never leaves a
partial write. The checks raise :class:`BadInput`, which carries the finished envelope; each
tool catches it at its top and returns the envelope, so the refusal lands on the span like any
other.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from .. import conventions as c
from .envelope import refusal

MAX_KEY_LENGTH = 512
"""Longest accepted state key, idempotency key, plan id or object-set name, in characters."""
DEFAULT_MAX_VALUE_BYTES = 256 * 1024
"""Default cap on one stored value's JSON encoding (UTF-8 bytes)."""


class BadInput(Exception):
    """Raised by a check; ``envelope`` is the ``invalid_argument`` refusal to return."""

    def __init__(self, envelope: dict[str, Any]) -> None:
        super().__init__(envelope["message"])
        self.envelope = envelope


def invalid(message: str, **context: Any) -> BadInput:
    """An ``invalid_argument`` refusal (not retryable as is: the caller must change the call)."""
    return BadInput(refusal(c.OUTCOME_INVALID_ARGUMENT, message, retry=False, **context))


def text(name: str, value: Any, *, max_length: int = MAX_KEY_LENGTH) -> str:
    """``value`` as a non-empty string of at most ``max_length`` characters."""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, got {type(value).__name__} {_show(value)}; pass a non-empty string")
    if not value.strip():
        raise invalid(f"{name} must be a non-empty string, got {value!r}")
    if len(value) > max_length:
        raise invalid(f"{name} is {len(value)} characters long; the limit is {max_length}: use a shorter {name}")
    return value


def optional_text(name: str, value: Any) -> str | None:
    """``None``, or a non-empty string (see :func:`text`)."""
    return None if value is None else text(name, value)


def canonical_json(name: str, value: Any, *, max_bytes: int) -> str:
    """The canonical JSON text of ``value`` (sorted keys, no NaN), at most ``max_bytes`` long."""
    try:
        encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise invalid(
            f"{name} must be a JSON value (string, number, boolean, null, list or object with string keys); "
            f"{_show(value)} is not: {exc}"
        ) from None
    size = len(encoded.encode("utf-8"))
    if size > max_bytes:
        raise invalid(f"{name} is {size} bytes as JSON; the limit is {max_bytes} bytes: store a smaller value")
    return encoded


def number(name: str, value: Any, *, low: float, high: float) -> float:
    """A finite real number in ``[low, high]`` (booleans are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid(f"{name} must be a number, got {_show(value)}")
    if not low <= value <= high:
        raise invalid(f"{name}={value!r} is out of range: pass a value from {low:g} to {high:g}")
    return float(value)


def digest(*parts: str) -> str:
    """A hex SHA-256 of the parts (NUL-separated), for hashes that go on spans and into tables."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."

"""Input checks shared by the guards: bad input becomes an ``invalid_argument`` envelope.

A guard validates everything before it touches the database, so a bad call never leaves a
partial write. The checks raise :class:`BadInput`, which carries the finished envelope; each
tool catches it at its top and returns the envelope, so the refusal lands on the span like any
other.
"""

from __future__ import annotations

import hashlib
import hmac
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
        super().__init__(envelope[c.ENVELOPE_MESSAGE])
        self.envelope = envelope


def invalid(message: str, *, retry: bool = True, **context: Any) -> BadInput:
    """An ``invalid_argument`` refusal. ``retry`` is true by the envelope's definition: the call
    can succeed once the caller changes what the message names; pass ``retry=False`` only when
    nothing the caller can send will do (for example a registered action that is broken)."""
    return BadInput(refusal(c.OUTCOME_INVALID_ARGUMENT, message, retry=retry, **context))


def _encodable(name: str, value: str) -> None:
    """Refuse text UTF-8 cannot carry (a lone surrogate, which JSON from a model can contain)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(f"{name} contains characters that are not valid Unicode text (a lone surrogate); "
                      f"send it as plain UTF-8 text") from None


def text(name: str, value: Any, *, max_length: int = MAX_KEY_LENGTH) -> str:
    """``value`` as a non-empty string of at most ``max_length`` characters."""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, got {type(value).__name__} {show(value)}; pass a non-empty string")
    if not value.strip():
        raise invalid(f"{name} must be a non-empty string, got {value!r}")
    if len(value) > max_length:
        raise invalid(f"{name} is {len(value)} characters long; the limit is {max_length}: use a shorter {name}")
    _encodable(name, value)
    return value


def optional_text(name: str, value: Any) -> str | None:
    """``None``, or a non-empty string (see :func:`text`)."""
    return None if value is None else text(name, value)


def canonical_json(name: str, value: Any, *, max_bytes: int) -> str:
    """The canonical JSON text of ``value`` (sorted keys, no NaN), at most ``max_bytes`` long."""
    try:
        encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise invalid(
            f"{name} must be a JSON value (string, number, boolean, null, list or object with string keys); "
            f"{show(value)} is not: {show(exc)}"
        ) from None
    _encodable(name, encoded)
    size = len(encoded.encode("utf-8"))
    if size > max_bytes:
        raise invalid(f"{name} is {size} bytes as JSON; the limit is {max_bytes} bytes: store a smaller value")
    return encoded


def number(name: str, value: Any, *, low: float, high: float) -> float:
    """A finite real number in ``[low, high]`` (booleans are refused)."""
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise invalid(f"{name} must be a finite number from {low:g} to {high:g}, got {show(value)}; send a number, not a string")
    if not low <= value <= high:
        raise invalid(f"{name}={value!r} is out of range: pass a value from {low:g} to {high:g}")
    return float(value)


def digest(*parts: str, key: bytes | None = None) -> str:
    """A hex SHA-256 of the parts (NUL-separated), for hashes that go on spans and into tables.

    With ``key`` it is the HMAC-SHA-256 under that key instead: for values a reader could guess
    (an idempotency key), whose plain hash would confirm the guess.
    """
    h = hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def show(value: Any) -> str:
    """A short, safe rendering of a bad value for a message (never raises)."""
    try:
        shown = repr(value)
    except Exception:  # e.g. an int with too many digits to render
        return f"a {type(value).__name__}"
    return shown if len(shown) <= 80 else shown[:77] + "..."

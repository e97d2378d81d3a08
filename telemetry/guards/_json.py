"""One JSON encoder for the guards: checked, bounded, and canonical when asked.

The standard ``json.dumps`` raises whatever it meets (RecursionError for a deep value,
ValueError for a 5000-digit int, an object's own exception from ``default=``) and happily
writes text UTF-8 cannot carry (a lone surrogate). :func:`encode` walks the value once, refuses
what is not JSON with :class:`NotJSON` (which names the path and the reason), stops early when
the text grows past the byte limit, and never recurses deeper than :data:`MAX_JSON_DEPTH`.

Two forms:

- the *stored* form keeps numbers as sent (``500.0`` stays ``500.0``, so a read gives back
  exactly what was written) and refuses sets;
- the *canonical* form (in the spirit of RFC 8785, the JSON Canonicalization Scheme) is the
  one text of a value's meaning: object keys sorted by UTF-16 code units, numbers by value
  (``500``, ``500.0`` and ``5e2`` are all ``500``; ``-0.0`` is ``0``), sets and frozensets as
  arrays sorted by their members' canonical text, tuples as arrays. It is the same in every
  process whatever ``PYTHONHASHSEED`` is, because nothing in it depends on hashing or on
  insertion order.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from .. import conventions as c

MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted in a value."""
INT_MIN: Final = c.INT64_MIN
INT_MAX: Final = c.INT64_MAX
"""Integers must fit in 64 signed bits: what every JSON reader and OTLP can carry exactly."""
_FLOAT_AS_INT_BELOW: Final = 1e21
"""Canonical form writes an integral float below this magnitude as an integer (as ECMAScript's
number-to-string does), so a float and the int of the same value get the same text."""

_encode_string = json.JSONEncoder(ensure_ascii=False).encode


class NotJSON(ValueError):
    """``value`` cannot be encoded: ``path`` says where (``""`` for the value itself, then
    ``["key"][3]`` steps), ``reason`` what is wrong and what to send instead."""

    def __init__(self, path: str, reason: str, *, shape: bool = True) -> None:
        super().__init__(f"{path or 'the value'}: {reason}")
        self.path = path
        self.reason = reason
        self.shape = shape
        """True when the value is not JSON at all; False when it is too big or too long."""


def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _check_text(text: str, path: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotJSON(
            path, "contains characters that are not valid Unicode text (a lone surrogate); send plain UTF-8 text",
            shape=False,
        ) from None


def _step(key: str) -> str:
    shown = key if len(key) <= 40 else key[:37] + "..."
    return "[" + _encode_string(shown.encode("utf-8", "backslashreplace").decode("ascii", "replace")) + "]"


class _Encoder:
    __slots__ = ("canonical", "budget", "used")

    def __init__(self, canonical: bool, budget: int) -> None:
        self.canonical = canonical
        self.budget = budget
        self.used = 0

    def _spend(self, piece: str, path: str) -> str:
        self.used += len(piece)
        if self.used > self.budget:
            raise NotJSON(
                path, f"makes the value over {self.budget} bytes as JSON; the limit is {self.budget} bytes: send a smaller value",
                shape=False,
            )
        return piece

    def encode(self, value: Any, path: str, depth: int) -> str:
        if value is None:
            return self._spend("null", path)
        if value is True or value is False:
            return self._spend("true" if value else "false", path)
        if isinstance(value, str):
            if len(value) > self.budget:
                raise NotJSON(
                    path, f"is at least {len(value)} bytes as JSON; the limit is {self.budget} bytes: send a shorter text",
                    shape=False,
                )
            _check_text(value, path)
            return self._spend(_encode_string(value), path)
        if isinstance(value, int):
            if isinstance(value, bool):  # a bool subclass that is not True/False itself
                return self._spend("true" if value else "false", path)
            if not INT_MIN <= value <= INT_MAX:
                raise NotJSON(path, f"is an integer of {value.bit_length()} bits; integers must fit in 64 signed bits "
                                    f"(send a larger number as a string)")
            return self._spend(str(int(value)), path)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise NotJSON(path, f"is {value!r}, which JSON cannot carry; send a finite number or null")
            if self.canonical and value.is_integer() and abs(value) < _FLOAT_AS_INT_BELOW:
                return self._spend(str(int(value)), path)
            return self._spend(float.__repr__(float(value)), path)
        if depth >= MAX_JSON_DEPTH:
            raise NotJSON(path, f"nests deeper than {MAX_JSON_DEPTH} levels; the limit is {MAX_JSON_DEPTH}: send a flatter value",
                          shape=False)
        if isinstance(value, (list, tuple)):
            self._spend("[]", path)
            items = [self.encode(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
            self._spend("," * max(len(items) - 1, 0), path)
            return "[" + ",".join(items) + "]"
        if isinstance(value, (set, frozenset)) and self.canonical:
            self._spend("[]", path)
            members = sorted(self.encode(item, f"{path}{{}}", depth + 1) for item in value)
            self._spend("," * max(len(members) - 1, 0), path)
            return "[" + ",".join(members) + "]"
        if isinstance(value, dict):
            return self._object(value, path, depth)
        kind = "a set (send a list)" if isinstance(value, (set, frozenset)) else f"a {type(value).__name__}"
        raise NotJSON(path, f"is {kind}, not a JSON value; send a string, number, boolean, null, list or object")

    def _object(self, value: dict[Any, Any], path: str, depth: int) -> str:
        self._spend("{}", path)
        items = dict(dict.items(value))  # the stored items, whatever a subclass overrides
        keys = list(items)
        for key in keys:
            if not isinstance(key, str):
                raise NotJSON(path, f"has a key of type {type(key).__name__}; JSON object keys are strings")
            _check_text(key, f"{path} key {_step(key)}")
        keys.sort(key=_utf16_key if self.canonical else None)
        parts = []
        for key in keys:
            name = self._spend(_encode_string(key), path)
            parts.append(name + ":" + self.encode(items[key], path + _step(key), depth + 1))
        self._spend("," * max(len(parts) - 1, 0) + ":" * len(parts), path)
        return "{" + ",".join(parts) + "}"


def encode(value: Any, *, max_bytes: int, canonical: bool = False) -> str:
    """The JSON text of ``value`` (compact, sorted keys), at most ``max_bytes`` UTF-8 bytes.

    Raises :class:`NotJSON` for anything else; never another exception for any input (an
    object's own ``__eq__``, ``__hash__`` or ``__iter__`` is never called, except a set
    member's hash, which the set already computed).
    """
    kind = type(value)
    if kind is int and INT_MIN <= value <= INT_MAX:  # a lone scalar: no walk, no encoder object
        text = str(value)
    elif kind is str and value.isascii() and len(value) < max_bytes:
        text = _encode_string(value)
    else:
        text = _Encoder(canonical, max_bytes).encode(value, "", 0)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > max_bytes:
        raise NotJSON("", f"is {size} bytes as JSON; the limit is {max_bytes} bytes: send a smaller value", shape=False)
    return text

"""Every guard's input checks, in one place, with one set of limits.

A guard tool is called by a model, a fuzzer or a careless caller, so anything can arrive: a
lone surrogate (``json.loads('"\\ud800"')`` yields one), a 10 MB id, a 5000-digit integer, a
dict nested a thousand deep, an object whose ``__repr__`` raises. Every guard validates all of
its input here before it touches the store, so a bad call writes nothing, and answers with an
``invalid_argument`` envelope whose message names the argument, the limit and what to send.

The limits (also in ``docs/guards.md``):

=========================  ==========================================================
:data:`MAX_ID_LENGTH`       512 characters: keys, ids, versions, plan ids, agent ids
:data:`MAX_TEXT_LENGTH`     16,384 characters: objectives, constraint texts, reasons
:data:`MAX_LIST_ITEMS`      1,000 items in one list argument (constraints, waivers, ...)
:data:`MAX_JSON_DEPTH`      64 levels of nested arrays and objects in a JSON value
``INT_MIN``..``INT_MAX``    integers fit in 64 signed bits; floats are finite
``DEFAULT_MAX_VALUE_BYTES`` 256 KiB of JSON per stored value (``StateStore(max_value_bytes=)``)
=========================  ==========================================================

Texts must be valid Unicode (no lone surrogates) and not blank. :func:`show` renders any value
for a message in at most :data:`MAX_SHOWN` characters and never raises.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Mapping
from typing import Any, Final

from .. import conventions as c
from ._envelope import refusal
from ._json import INT_MAX, INT_MIN, MAX_JSON_DEPTH, NotJSON, encode

__all__ = [
    "BadInput",
    "DEFAULT_MAX_VALUE_BYTES",
    "INT_MAX",
    "INT_MIN",
    "MAX_ID_LENGTH",
    "MAX_JSON_DEPTH",
    "MAX_LIST_ITEMS",
    "MAX_PAYLOAD_BYTES",
    "MAX_SHOWN",
    "MAX_TEXT_LENGTH",
    "Problems",
    "canonical_payload",
    "digest",
    "invalid",
    "json_text",
    "number",
    "optional_text",
    "show",
    "text",
    "text_problem",
    "valid_text",
]

MAX_ID_LENGTH: Final = 512
"""Longest key, id, version token, plan id, object-set name or agent id, in characters."""
MAX_TEXT_LENGTH: Final = 16_384
"""Longest free text (an objective, a constraint, a waiver reason, a check), in characters."""
MAX_LIST_ITEMS: Final = 1_000
"""Most items in one list argument (constraints, waivers, acceptance criteria)."""
DEFAULT_MAX_VALUE_BYTES: Final = 256 * 1024
"""Default cap on one stored value's JSON text, in UTF-8 bytes."""
MAX_SHOWN: Final = 80
"""Longest rendering of a bad value inside a message, in characters."""
MAX_PAYLOAD_BYTES: Final = 1024 * 1024
"""Longest canonical idempotency payload (the arguments of one keyed call), in UTF-8 bytes."""


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


# --- rendering a value for a message ----------------------------------------------------------


def show(value: Any, limit: int = MAX_SHOWN) -> str:
    """A short rendering of any value for a message: at most ``limit`` characters, plain
    UTF-8 (a lone surrogate shows as ``\\ud800``), and it never raises.

    Containers show their first items only, an integer too long to print shows its size, and
    an object whose ``__repr__`` raises shows its type.
    """
    try:
        shown = _render(value, limit, 0)
    except Exception:
        shown = f"a {_type_name(value)}"
    shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__name__)[:40]
    except Exception:  # pragma: no cover - a metaclass with a raising __name__
        return "value"


def _render(value: Any, limit: int, depth: int) -> str:
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 128:
            return f"an integer of {value.bit_length()} bits"
        return repr(int(value))
    if isinstance(value, str):
        head = repr(str.__getitem__(value, slice(0, limit)))
        return head if len(value) <= limit else head[:-1] + "..." + head[-1]
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if depth >= 2:
            return "{...}" if isinstance(value, dict) else "[...]"
        brackets = "[]" if isinstance(value, list) else "()" if isinstance(value, tuple) else "{}"
        parts: list[str] = []
        used = 2
        items = dict.items(value) if isinstance(value, dict) else value
        for i, item in enumerate(items):
            if used > limit or i >= 8:
                parts.append("...")
                break
            part = (
                f"{_render(item[0], limit, depth + 1)}: {_render(item[1], limit, depth + 1)}"
                if isinstance(value, dict)
                else _render(item, limit, depth + 1)
            )
            parts.append(part)
            used += len(part) + 2
        return brackets[0] + ", ".join(parts) + brackets[1]
    shown = repr(value)
    if not isinstance(shown, str):  # pragma: no cover - repr() itself enforces str
        return f"a {_type_name(value)}"
    return shown[: limit + 1]


# --- texts ------------------------------------------------------------------------------------


def text_problem(name: str, value: Any, *, limit: int = MAX_ID_LENGTH) -> str | None:
    """What is wrong with ``value`` as the text argument ``name`` (None when nothing is).

    A text is a non-blank ``str`` of at most ``limit`` characters that UTF-8 can carry, without
    a NUL character (PostgreSQL's text cannot hold one, so no store accepts it: a key that works
    on one store works on every store).
    """
    if not isinstance(value, str):
        return f"{name} must be a string, got {_type_name(value)} {show(value)}; send a non-empty string"
    if not value.strip():
        return f"{name} must be a non-empty string, got {show(value)}"
    if len(value) > limit:
        return f"{name} is {len(value)} characters long; the limit is {limit}: send a shorter {name}"
    if "\0" in value:
        return f"{name} contains a NUL character (\\x00): {show(value)}; send text without it"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return (
                f"{name} contains characters that are not valid Unicode text (a lone surrogate): "
                f"{show(value)}; send it as plain UTF-8 text"
            )
    return None


def text(name: str, value: Any, *, max_length: int = MAX_ID_LENGTH) -> str:
    """``value`` as a non-blank string of at most ``max_length`` characters, or :class:`BadInput`."""
    # Every guard call checks several texts: the common one (a plain ASCII str) is decided here,
    # by the same rules as text_problem, without building anything.
    if type(value) is str and value.isascii() and len(value) <= max_length and "\0" not in value and value \
            and not value.isspace():
        return value
    problem = text_problem(name, value, limit=max_length)
    if problem is not None:
        raise invalid(problem)
    return str(value)


def optional_text(name: str, value: Any, *, max_length: int = MAX_ID_LENGTH) -> str | None:
    """``None``, or a text (see :func:`text`)."""
    return None if value is None else text(name, value, max_length=max_length)


def valid_text(value: Any, *, max_length: int = MAX_ID_LENGTH) -> str | None:
    """``value`` when it is a valid text, else None: for recording what was valid on a refusal."""
    return value if text_problem("value", value, limit=max_length) is None else None


class Problems:
    """Collects every problem of one call's arguments, so a refusal names them all at once.

    Each check returns the value when it is valid and None (recording why) when not::

        problems = Problems("register_task")
        task_id = problems.text("task_id", task_id)
        if problems:
            return problems.refusal()
    """

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.found: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.found)

    def add(self, problem: str | None) -> None:
        if problem:
            self.found.append(problem)

    def text(self, name: str, value: Any, *, limit: int = MAX_ID_LENGTH, optional: bool = False) -> str | None:
        if optional and value is None:
            return None
        problem = text_problem(name, value, limit=limit)
        if problem is None:
            return str(value)
        self.add(problem + " (or omit it)" if optional else problem)
        return None

    def items(self, name: str, value: Any) -> list[Mapping[str, Any]]:
        """``value`` as a list of objects; each non-object item is a problem, named by position."""
        if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, (list, tuple)):
            self.add(f"{name} must be a list of objects, got {_type_name(value)} {show(value)}")
            return []
        if len(value) > MAX_LIST_ITEMS:
            self.add(f"{name} has {len(value)} items; the limit is {MAX_LIST_ITEMS}: send fewer")
            return []
        good: list[Mapping[str, Any]] = []
        for i, item in enumerate(value):
            if isinstance(item, dict):
                good.append(item)
            else:
                self.add(f"{name}[{i}] must be an object, got {_type_name(item)} {show(item)}")
        return good

    def refusal(self) -> dict[str, Any]:
        """The ``invalid_argument`` envelope naming every problem found."""
        shown = self.found[:20] + ([f"and {len(self.found) - 20} more problems"] if len(self.found) > 20 else [])
        return refusal(c.OUTCOME_INVALID_ARGUMENT, f"{self.tool}: " + "; ".join(shown), retry=True)


# --- JSON values and numbers ------------------------------------------------------------------


def _refused(name: str, bad: NotJSON) -> BadInput:
    what = (
        f"{name} must be a JSON value (string, number, boolean, null, list or object with string keys): "
        if bad.shape
        else ""
    )
    path = bad.path if len(bad.path) <= 100 else f"{bad.path[:60]}...{bad.path[-36:]}"
    return invalid(f"{what}{name}{path} {bad.reason}")


def json_text(name: str, value: Any, *, max_bytes: int) -> str:
    """The stored JSON text of ``value`` (sorted keys, compact, numbers as sent), or :class:`BadInput`."""
    try:
        return encode(value, max_bytes=max_bytes)
    except NotJSON as bad:
        raise _refused(name, bad) from None


def canonical_payload(name: str, value: Any, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """The canonical JSON text of ``value``: the same text for every value that means the same.

    Keys sorted, numbers by value (``500`` and ``500.0`` are one number), sets as sorted
    arrays, tuples as arrays; identical across processes and hash seeds. Raises
    :class:`BadInput` for a value JSON cannot mean (see :mod:`telemetry.guards._json`).
    """
    try:
        return encode(value, max_bytes=max_bytes, canonical=True)
    except NotJSON as bad:
        raise _refused(name, bad) from None


def number(name: str, value: Any, *, low: float, high: float) -> float:
    """A finite real number in ``[low, high]`` (booleans are refused), or :class:`BadInput`."""
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise invalid(f"{name} must be a finite number from {low:g} to {high:g}, got {show(value)}; send a number")
    if not low <= value <= high:
        raise invalid(f"{name}={show(value)} is out of range: send a value from {low:g} to {high:g}")
    return float(value)


def digest(*parts: str, key: bytes | None = None) -> str:
    """A hex SHA-256 of the parts (NUL-separated), for hashes that go on spans and into tables.

    With ``key`` it is the HMAC-SHA-256 under that key instead: for values a reader could guess
    (an idempotency key), whose plain hash would confirm the guess.
    """
    if key is None and len(parts) == 1:  # a stored value's hash, on every accepted write: one call
        return hashlib.sha256(parts[0].encode("utf-8", "surrogatepass") + b"\0").hexdigest()
    h = hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()

"""Query parameters written as the text ClickHouse parses them from, for chDB in process.

ClickHouse binds a ``{name:Type}`` placeholder by parsing the value's text as that type: a
``String`` in the *escaped* form (a backslash starts an escape, and a raw tab or newline would end
the value), an ``Array(String)`` as its literal (``['a','b']``, each element quoted), an integer as
its decimal digits. chDB takes every parameter as such text. Over HTTP clickhouse-connect sends
the parameters; a chDB read does without that client (its import alone costs a noticeable part of
a chDB report's start), so the four types the generated selects bind are written here. A test sends
arbitrary text through the engine and back, and a value that cannot be sent exactly is refused by
name, never sent changed.
"""

from __future__ import annotations

from typing import Any

from ... import conventions as c
from ...exceptions import ClickHouseInputError

__all__ = ["chdb_parameters", "parameter_text", "sendable"]

_ESCAPES = str.maketrans({"\\": "\\\\", "'": "\\'", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0"})
"""Every character that ends a value, starts an escape or closes a quoted element, as its escape
(both forms read the same escapes back)."""

_INTEGER_RANGES = {"Int64": (-c.INT64_MAX - 1, c.INT64_MAX), "UInt64": (0, 2**64 - 1)}


def sendable(text: str) -> bool:
    """Whether ``text`` can reach ClickHouse as it is: UTF-8 encodable (no lone surrogate, as a
    command line's bytes that are not UTF-8 arrive)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(value: str, name: str) -> str:
    if not sendable(value):
        raise ClickHouseInputError(
            f"the query parameter {name} ({value!r}) is not Unicode text that can be sent to ClickHouse "
            "(it holds a lone surrogate, e.g. from bytes that are not UTF-8); give it as UTF-8 text")
    return value.translate(_ESCAPES)


def parameter_text(value: Any, type_name: str, name: str = "value") -> str:
    """``value`` as the text ClickHouse parses into ``type_name`` (``String``, ``Array(String)``,
    ``Int64`` or ``UInt64``, the types the generated selects bind); anything else is refused."""
    if type_name == "String" and isinstance(value, str):
        return _escaped(value, name)
    if (type_name == "Array(String)" and isinstance(value, (list, tuple))
            and all(isinstance(item, str) for item in value)):
        return "[" + ",".join(f"'{_escaped(item, name)}'" for item in value) + "]"
    if type_name in _INTEGER_RANGES and isinstance(value, int) and not isinstance(value, bool):
        low, high = _INTEGER_RANGES[type_name]
        if not low <= value <= high:
            raise ClickHouseInputError(f"the query parameter {name} ({value!r}) does not fit a {type_name} "
                                       f"(from {low} to {high})")
        return str(value)
    raise ClickHouseInputError(f"the query parameter {name} ({value!r}) cannot be bound as {type_name}")


def chdb_parameters(parameters: dict[str, Any], types: dict[str, str]) -> dict[str, str]:
    """Each parameter as chDB takes it: its text, by the type its placeholder declares."""
    return {name: parameter_text(value, types[name], name) for name, value in parameters.items()}

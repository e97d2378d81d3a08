"""Verification as the server's contract: a write's result says how the caller verifies it.

A write that answered ok has not necessarily persisted as meant (a fail-over, a replica, a
transform). When the server cannot read it back itself, the next best thing is to say, in the
result, which read tool to call and what to compare: ``{"ok": true, ..., "verification_required":
{"tool": "get_profile", "arguments": {"user": "u-1"}, "compare": {"email": "a@b.example"}}}``.
The model can act on it; the span records the read tool and the compared field names (never the
values), so the audit can check the read path is the source of truth and not a cache.

:func:`reads_cache` marks a read tool whose answer comes from a cache: a verification through it
repeats what the write just put there. The audit and the MCP tool plan read the mark.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from .. import conventions as c
from ..instrument import current_call

__all__ = ["READS_CACHE_ATTRIBUTE", "reads_cache", "reads_cache_of", "verification_required"]

READS_CACHE_ATTRIBUTE: Final = "__outcome_telemetry_reads_cache__"
"""Set to True on a read tool (and its instrumented wrapper) that :func:`reads_cache` marked."""
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
MAX_COMPARED: Final = 32

F = TypeVar("F", bound=Callable[..., Any])


def verification_required(tool: str, *, arguments: Mapping[str, Any], compare: Mapping[str, Any]) -> dict[str, Any]:
    """The ``verification_required`` value of a success envelope: call ``tool`` with ``arguments``
    and check that the fields of ``compare`` hold those values.

    Raises ``ValueError`` naming the bad value (a tool name that is not one, nothing to compare, a
    field name that is not an identifier). Inside an instrumented call it records the read tool and
    the compared field names on the span. Use it in the result::

        return success(key=key, verification_required=verification_required(
            "get_profile", arguments={"user": user}, compare={"email": email}))
    """
    if not isinstance(tool, str) or not _TOOL_NAME.fullmatch(tool):
        raise ValueError(f"verification_required: tool {tool!r} is not a tool name (1 to 128 letters, digits, _ . : / -)")
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise ValueError(f"verification_required: arguments must map parameter names to values, got {arguments!r:.80}")
    if not isinstance(compare, Mapping) or not compare:
        raise ValueError("verification_required: compare must name at least one field and the value to expect")
    if len(compare) > MAX_COMPARED:
        raise ValueError(f"verification_required: compare names {len(compare)} fields; at most {MAX_COMPARED}")
    for field in compare:
        if not isinstance(field, str) or not _FIELD.fullmatch(field):
            raise ValueError(f"verification_required: compare field {field!r:.80} is not a field name (an identifier, "
                             f"dots allowed for a nested field)")
    current_call().set_attributes({c.TOOL_VERIFICATION_TOOL: tool, c.TOOL_VERIFICATION_COMPARE: sorted(compare)})
    return {c.VERIFY_TOOL: tool, c.VERIFY_ARGUMENTS: dict(arguments), c.VERIFY_COMPARE: dict(compare)}


def reads_cache(func: F) -> F:
    """Mark ``func``, a read tool, as answering from a cache rather than the source of truth.

    Put it outermost or innermost of ``@instrument_tool`` (the mark is read through wrappers).
    A write whose result asks for verification through such a tool is reported by the audit.
    """
    setattr(func, READS_CACHE_ATTRIBUTE, True)
    return func


def reads_cache_of(func: Any) -> bool:
    """Whether ``func`` or anything it wraps (``__wrapped__``, a bound method's function) is marked."""
    seen = 0
    while func is not None and seen < 16:
        if getattr(func, READS_CACHE_ATTRIBUTE, False) is True:
            return True
        func = getattr(func, "__wrapped__", None) or getattr(func, "__func__", None)
        seen += 1
    return False

"""A recorded result (the text a tracer stored for a tool call's output) read as a verdict.

Other instrumentations record what a tool returned as text: JSON of the value, often wrapped in
the framework's own message (LangChain's serialised ``ToolMessage``, an MCP ``CallToolResult``),
sometimes encoded twice. :func:`read_recorded` unwraps those, parses the value once, and gives it
to the same rules a live result meets (:func:`telemetry.envelopes.result_class`), so a
``{"success": false}`` is a failure whether the decorator saw it or a trace file holds it.

The text is hostile data: it is parsed with the standard JSON parser only (never evaluated),
bounded in size (:data:`telemetry.conventions.MAX_RECORDED_RESULT_CHARS`) and in unwrapping depth,
and a text that cannot be read is said to be so (:attr:`Recorded.status`), never guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .. import conventions as c
from ._classify import Report, result_class
from ._json_text import json_or_text
from ._rules import ResultClass

__all__ = [
    "RECORDED_ABSENT",
    "RECORDED_JUDGED",
    "RECORDED_TEXT",
    "RECORDED_TOO_LARGE",
    "Recorded",
    "read_recorded",
    "unwrap_recorded",
]

RECORDED_JUDGED = "judged"
"""The text held a value (JSON, possibly wrapped) and the rules judged it."""
RECORDED_TEXT = "text"
"""The text is not JSON: a plain string result, which the rules judge as a string (ok)."""
RECORDED_ABSENT = "absent"
"""No result was recorded (the tracer's content capture is off, or the call raised)."""
RECORDED_TOO_LARGE = "too_large"
"""The text is longer than the limit: skipped and counted, never parsed."""

_MAX_DEPTH = 4
_LANGCHAIN_TOOL_MESSAGE = ("langchain", "schema", "messages", "ToolMessage")
_LANGCHAIN_CORE_TOOL_MESSAGE = ("langchain_core", "messages", "tool", "ToolMessage")


class Recorded(NamedTuple):
    """What a recorded result says: how it was read, and the verdict when it could be judged."""

    status: str
    verdict: ResultClass | None


def _message_content(value: Mapping[str, Any]) -> tuple[Any, bool] | None:
    """A serialised LangChain ``ToolMessage``'s content and whether it says status ``error``."""
    if value.get("lc") == 1 and tuple(value.get("id") or ()) in (_LANGCHAIN_TOOL_MESSAGE, _LANGCHAIN_CORE_TOOL_MESSAGE):
        kwargs = value.get("kwargs")
        if isinstance(kwargs, Mapping) and "content" in kwargs:
            return kwargs["content"], kwargs.get("status") == "error"
    if value.get("type") == "tool" and isinstance(value.get("data"), Mapping):
        data = value["data"]
        if "content" in data:
            return data["content"], data.get("status") == "error"
    return None


def _mcp_payload(value: Mapping[str, Any]) -> Any:
    """An MCP ``CallToolResult`` (not an error)'s structured content, or its one text part."""
    structured = value.get("structuredContent", value.get("structured_content"))
    if isinstance(structured, Mapping):
        return structured
    parts = value.get("content")
    if isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], Mapping):
        part = parts[0]
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            return part["text"]
    return None


def unwrap_recorded(text: str) -> tuple[Any, bool]:
    """The value a recorded result holds, and whether a wrapper itself said the call failed.

    Strings that are JSON are parsed (a value encoded twice is parsed twice), a LangChain
    ``ToolMessage`` gives its content, an MCP ``CallToolResult`` that is not an error gives its
    structured content or its one text part; at most a few levels deep, so a hostile text cannot
    make the walk long.
    """
    value: Any = text
    wrapper_error = False
    for _ in range(_MAX_DEPTH):
        if isinstance(value, str):
            parsed = json_or_text(value)
            if parsed is value or parsed == value:
                return value, wrapper_error
            value = parsed
            continue
        if not isinstance(value, Mapping):
            return value, wrapper_error
        message = _message_content(value)
        if message is not None:
            value, failed = message
            wrapper_error = wrapper_error or failed
            continue
        if value.get("isError") is not True and ("content" in value or "structuredContent" in value):
            payload = _mcp_payload(value)
            if payload is not None:
                value = payload
                continue
        return value, wrapper_error
    return value, wrapper_error


def read_recorded(text: str | None, report: Report | None = None) -> Recorded:
    """Judge a recorded result text with the same rules as a live result.

    ``None`` or an empty text is :data:`RECORDED_ABSENT`; a text longer than
    :data:`~telemetry.conventions.MAX_RECORDED_RESULT_CHARS` is :data:`RECORDED_TOO_LARGE`
    (never parsed). A wrapper that says the call failed (a LangChain ``ToolMessage`` with status
    ``error``) makes the outcome ``tool_error`` unless the value inside names a code.
    """
    if not text:
        return Recorded(RECORDED_ABSENT, None)
    if len(text) > c.MAX_RECORDED_RESULT_CHARS:
        return Recorded(RECORDED_TOO_LARGE, None)
    value, wrapper_error = unwrap_recorded(text)
    verdict = result_class(value) if report is None else result_class(value, report)
    if wrapper_error and verdict.outcome == c.OUTCOME_OK:
        verdict = ResultClass(c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, verdict.status_code)
    return Recorded(RECORDED_TEXT if isinstance(value, str) else RECORDED_JUDGED, verdict)

"""Outcomes of what MCP tools return, and refusal envelopes as ``isError`` results.

A server-side tool function returns a plain value, a dict (perhaps a refusal envelope
``{"ok": false, "error": CODE, ...}``) or a ``CallToolResult`` it built itself; the SDK wraps
the first two into a ``CallToolResult`` after the tool returned. The decorator sees the raw
value, so a dict envelope is classified by ``telemetry.classify`` as it is. A ``CallToolResult``
object spells its flag ``is_error`` (``isError`` only on the wire), which :func:`mcp_outcome`
reads, with the envelope code from ``structured_content`` when there is one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult, TextContent

from .. import conventions as c
from ..call import Call
from ..classify import classify_result


def _envelope_code(structured: Any) -> str | None:
    if not isinstance(structured, Mapping):
        return None
    outcome = classify_result(structured).outcome
    return None if outcome == c.OUTCOME_OK else outcome


def mcp_outcome(call: Call, result: Any) -> str | None:
    """The outcome of a returned ``CallToolResult``; None (keep the derived one) for anything else.

    ``isError`` gives the structured envelope's code, or ``tool_error``. An outcome the tool set
    itself with ``current_call().set_outcome()`` wins.
    """
    if call.outcome is not None or not isinstance(result, CallToolResult):
        return None
    code = _envelope_code(result.structured_content)
    if result.is_error:
        return code or c.OUTCOME_TOOL_ERROR
    return code


def envelope_result(envelope: Mapping[str, Any]) -> CallToolResult:
    """An envelope (``{"ok": ..., ...}``) as a ``CallToolResult``: ``isError`` when ``ok`` is false.

    Returning a refusal this way tells MCP clients (and the SDK's own server span, which marks
    ``error.type=tool_error``) that the call did not do what was asked, while the model still
    gets the whole envelope, as text and as ``structuredContent``, to act on. Annotate such a
    tool ``-> CallToolResult`` so the SDK publishes no output schema the envelope would violate.
    """
    if not isinstance(envelope, Mapping):
        raise TypeError(f"envelope_result takes an envelope mapping such as {{'ok': False, ...}}, got {envelope!r}")
    body = dict(envelope)
    text = json.dumps(body, default=str, ensure_ascii=False, indent=2)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=body,
        is_error=body.get("ok") is False,
    )

"""Refusal envelopes as ``isError`` results, and how MCP tool results are classified.

A server-side tool function returns a plain value, a dict (perhaps a refusal envelope
``{"ok": false, "error": CODE, ...}``) or a ``CallToolResult`` it built itself; the SDK wraps
the first two into a ``CallToolResult`` after the tool returned. The decorator sees the raw
value and ``telemetry.instrument._classify`` reads all three (a ``CallToolResult``'s ``is_error`` and the
envelope in its ``structured_content`` included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult, TextContent

from .. import conventions as c


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
        is_error=body.get(c.ENVELOPE_OK) is False,
    )

"""MCP integration: instrument the tools of an ``mcp`` SDK server (the ``[mcp]`` extra).

``import telemetry`` never imports this module or the SDK; importing ``telemetry.mcp`` does.

- :func:`tool` registers a function as an MCP tool *and* instruments it, in the right order, with
  one set of hints that becomes both the span's ``tool.hint.*`` attributes and the tool's
  ``readOnlyHint``/``destructiveHint``/``idempotentHint`` annotations in ``tools/list``.
- :func:`instrument_server` instruments every tool already registered on an ``MCPServer`` (and
  :func:`uninstrument_server` puts them back); each call runs with the caller's agent, run and
  tool-call id from the request's ``_meta``.
- :func:`envelope_result` turns a guard's refusal envelope into an ``isError`` result.
- :func:`expose_tool_plan` (opt-in) registers a read-only meta tool returning :func:`tool_plan`:
  each tool's kind, its discover -> call -> verify sequence, idempotency and plan/commit pair.
- :func:`trace_meta` puts the current trace context into a request's ``_meta``, for callers that
  do not go through the SDK's own client (which injects it by itself).

See ``docs/mcp.md``.
"""

from __future__ import annotations

from .._extras import require

require("mcp", extra="mcp", needed_for="telemetry.mcp")  # fail early, with the fix in the message

from ._hints import annotations_for, hints_from_annotations
from ._plan import ToolContract, expose_tool_plan, tool_plan
from ._propagation import trace_meta
from ._results import envelope_result
from ._server import instrument_server, tool, uninstrument_server

__all__ = [
    "ToolContract",
    "annotations_for",
    "envelope_result",
    "expose_tool_plan",
    "hints_from_annotations",
    "instrument_server",
    "tool",
    "tool_plan",
    "trace_meta",
    "uninstrument_server",
]

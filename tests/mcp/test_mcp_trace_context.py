"""One trace from the agent to the server's tool span, through the request's `_meta`."""

from __future__ import annotations

from typing import Any

import mcp.shared._otel as sdk_otel
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

import telemetry.mcp as tmcp

from mcp_support import by_name, sdk_spans  # noqa: F401  (fixture)


def server_with_add() -> MCPServer:
    server = MCPServer("traced")

    @tmcp.tool(server, kind="read")
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


async def test_agent_span_client_span_server_span_and_tool_span_form_one_trace(
    telemetry_capture: Any, sdk_spans: Any
) -> None:
    """Agent span -> SDK CLIENT span -> SDK SERVER span -> our execute_tool span, one trace id."""
    tracer = telemetry_capture.runtime.tracer
    async with Client(server_with_add(), mode="legacy") as client:  # connected before the agent span exists
        with tracer.start_as_current_span("agent turn") as agent_span:
            await client.call_tool("add", {"a": 1, "b": 2})
    sdk = sdk_spans.get_finished_spans()
    client_span = by_name(sdk, "MCP send tools/call add")
    server_span = by_name(sdk, "tools/call add")
    tool_span = telemetry_capture.span("add")
    assert client_span.kind is SpanKind.CLIENT and server_span.kind is SpanKind.SERVER
    chain = [(tool_span, server_span), (server_span, client_span)]
    for child, parent in chain:
        assert child.parent is not None and child.parent.span_id == parent.context.span_id
    assert client_span.parent is not None and client_span.parent.span_id == agent_span.get_span_context().span_id
    assert {s.context.trace_id for s in (tool_span, server_span, client_span)} == {agent_span.get_span_context().trace_id}


async def test_trace_meta_carries_a_captured_context_to_the_server(
    telemetry_capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call made after the agent's span ended joins that span's trace only through trace_meta(context=...).

    The client side opens no span of its own here (the SDK's tracer pinned to a no-op one, as in an
    agent process without OpenTelemetry SDK tracing, or a non-SDK client), so the only carrier of
    the trace is the `_meta` the helper built. With SDK tracing active the SDK's CLIENT span would
    re-inject the current context instead (docs/mcp.md says to attach the context then).
    """
    monkeypatch.setattr(sdk_otel, "_tracer", trace.NoOpTracer())
    tracer = telemetry_capture.runtime.tracer
    async with Client(server_with_add(), mode="legacy") as client:
        with tracer.start_as_current_span("agent turn") as agent_span:
            captured = trace.set_span_in_context(agent_span)
        await client.call_tool("add", {"a": 1, "b": 1})  # no context anywhere: a trace of its own
        await client.call_tool("add", {"a": 2, "b": 2}, meta=tmcp.trace_meta({"note": "kept"}, context=captured))
    orphan, joined = telemetry_capture.spans("add")
    agent = agent_span.get_span_context()
    assert orphan.context.trace_id != agent.trace_id
    assert joined.context.trace_id == agent.trace_id
    assert joined.parent is not None and joined.parent.span_id == agent.span_id and joined.parent.is_remote


def test_trace_meta_injects_only_a_valid_context_and_copies() -> None:
    """trace_meta adds traceparent for a live span, nothing without one, and never mutates the given _meta."""
    given = {"progressToken": 1}
    assert tmcp.trace_meta(given) == given
    with trace.NoOpTracer().start_as_current_span("noop"):
        assert "traceparent" not in tmcp.trace_meta()
    with TracerProvider().get_tracer("t").start_as_current_span("live") as span:
        meta = tmcp.trace_meta(given)
    ctx = span.get_span_context()
    assert meta["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert meta["progressToken"] == 1 and given == {"progressToken": 1}

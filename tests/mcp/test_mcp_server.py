"""A real MCP client calls an instrumented server: the triad on each kind of result, nesting, counts."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from opentelemetry.trace import SpanKind, StatusCode

import telemetry.mcp as tmcp
from telemetry import conventions as c
from telemetry import current_call, instrument_tool
from telemetry.guards._envelope import refusal, success

from mcp_support import by_name, sdk_spans  # noqa: F401  (fixture)


def build_server() -> MCPServer:
    """A server with one tool per result shape, instrumented the three supported ways."""
    server = MCPServer("outcomes")
    versions = {"plan": "v1"}

    @server.tool()
    @instrument_tool(kind="read")
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    @tmcp.tool(server, kind="write")
    def set_plan(value: str, expected_version: str) -> dict[str, Any]:
        """Version-bound write: refused with an envelope when the version moved."""
        current = versions["plan"]
        current_call().set_attributes({c.STATE_KEY: "plan", c.STATE_VERSION_CURRENT: current})
        if expected_version != current:
            return refusal(
                c.OUTCOME_REJECTED_STALE_VERSION,
                "the plan changed since you read it; re-read and retry",
                retry=True,
                current_version=current,
            )
        versions["plan"] = current + "'"
        return success(version=versions["plan"])

    @tmcp.tool(server, kind="write")
    def lookup(key: str) -> CallToolResult:
        """Returns the SDK's own isError result."""
        return CallToolResult(content=[TextContent(type="text", text=f"no {key}")], is_error=True)

    @tmcp.tool(server, kind="write")
    def refuse(key: str) -> CallToolResult:
        """Returns a refusal envelope as an isError result."""
        return tmcp.envelope_result(refusal(c.OUTCOME_NOT_FOUND, f"no {key}; list keys first", retry=False))

    def crash(x: int) -> str:
        """Raises."""
        raise RuntimeError(f"kaput {x}")

    server.add_tool(crash)
    tmcp.instrument_server(server, {"crash": {"kind": "write"}})
    return server


async def test_ok_call_nests_under_the_sdk_server_span(telemetry_capture: Any, sdk_spans: Any) -> None:
    """An ok call: our INTERNAL execute_tool span is the child of the SDK's tools/call SERVER span."""
    async with Client(build_server(), mode="legacy") as client:
        result = await client.call_tool("add", {"a": 1})
    assert result.is_error is False and result.structured_content == {"result": 3}
    ours = telemetry_capture.span("add")
    server_span = by_name(sdk_spans.get_finished_spans(), "tools/call add")
    assert ours.name == "execute_tool add" and ours.kind is SpanKind.INTERNAL
    assert server_span.kind is SpanKind.SERVER
    assert ours.parent is not None and ours.parent.span_id == server_span.context.span_id
    assert ours.context.trace_id == server_span.context.trace_id
    attrs = ours.attributes
    assert (attrs[c.TOOL_TRANSPORT], attrs[c.TOOL_READBACK], attrs[c.TOOL_OUTCOME]) == ("ok", "not_applicable", "ok")
    assert ours.status.status_code is StatusCode.UNSET


async def test_stale_write_envelope_is_transport_ok_outcome_code(telemetry_capture: Any) -> None:
    """A guarded write refused as stale: transport ok, outcome rejected_stale_version, envelope reaches the client."""
    async with Client(build_server(), mode="legacy") as client:
        accepted = await client.call_tool("set_plan", {"value": "a", "expected_version": "v1"})
        stale = await client.call_tool("set_plan", {"value": "b", "expected_version": "v1"})
    assert accepted.structured_content["ok"] is True
    assert stale.structured_content["error"] == c.OUTCOME_REJECTED_STALE_VERSION
    assert stale.structured_content["current_version"] == "v1'"
    first, second = telemetry_capture.spans("set_plan")
    assert first.attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert second.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    assert second.attributes[c.TOOL_OUTCOME] == c.OUTCOME_REJECTED_STALE_VERSION
    assert second.attributes[c.STATE_VERSION_CURRENT] == "v1'"
    assert second.status.status_code is StatusCode.ERROR
    assert telemetry_capture.sample(
        c.METRIC_GUARD_REFUSALS_TOTAL, {c.LABEL_TOOL: "set_plan", c.LABEL_REASON: c.OUTCOME_REJECTED_STALE_VERSION}
    ) == 1.0


@pytest.mark.parametrize(
    ("tool", "outcome"), [("lookup", c.OUTCOME_TOOL_ERROR), ("refuse", c.OUTCOME_NOT_FOUND)]
)
async def test_is_error_result_is_transport_ok_with_outcome(
    telemetry_capture: Any, sdk_spans: Any, tool: str, outcome: str
) -> None:
    """A returned CallToolResult(isError=True): transport ok, outcome tool_error or the envelope's code."""
    async with Client(build_server(), mode="legacy") as client:
        result = await client.call_tool(tool, {"key": "k"})
    assert result.is_error is True
    span = telemetry_capture.span(tool)
    assert span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    assert span.attributes[c.TOOL_OUTCOME] == outcome
    assert span.attributes[c.ERROR_TYPE] == outcome
    assert by_name(sdk_spans.get_finished_spans(), f"tools/call {tool}").attributes[c.ERROR_TYPE] == "tool_error"


async def test_exception_is_recorded_although_the_sdk_turns_it_into_is_error(
    telemetry_capture: Any, sdk_spans: Any
) -> None:
    """A tool that raises: the client sees only isError, our span keeps the exception class and event."""
    async with Client(build_server(), mode="legacy") as client:
        result = await client.call_tool("crash", {"x": 7})
    assert result.is_error is True and "kaput" not in result.content[0].text
    span = telemetry_capture.span("crash")
    assert span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_ERROR
    assert span.attributes[c.TOOL_OUTCOME] == c.OUTCOME_ERROR
    assert span.attributes[c.ERROR_TYPE] == "RuntimeError"
    assert [e.name for e in span.events] == ["exception"]
    assert span.events[0].attributes["exception.message"] == "kaput 7"
    server_span = by_name(sdk_spans.get_finished_spans(), "tools/call crash")
    assert span.parent is not None and span.parent.span_id == server_span.context.span_id


async def test_each_call_is_counted_once(telemetry_capture: Any, sdk_spans: Any) -> None:
    """Three calls through the SDK (with its server spans on) are three counts and three tool spans."""
    server = build_server()
    tmcp.instrument_server(server)  # a second pass must not wrap anything again
    async with Client(server, mode="legacy") as client:
        for a in range(3):
            await client.call_tool("add", {"a": a})
    assert telemetry_capture.calls("add") == 3.0
    assert telemetry_capture.calls("add", transport="ok", readback="not_applicable", outcome="ok") == 3.0
    assert len([s for s in telemetry_capture.spans("add") if s.name == "execute_tool add"]) == 3
    assert telemetry_capture.sample(c.METRIC_TOOL_CALL_DURATION + "_count", {c.LABEL_TOOL: "add"}) == 3.0


async def test_modern_in_process_client_nests_the_same_way(telemetry_capture: Any, sdk_spans: Any) -> None:
    """The default (direct, non-JSON-RPC) in-process client also gets the nested span and one count."""
    async with Client(build_server()) as client:
        await client.call_tool("add", {"a": 1})
    ours = telemetry_capture.span("add")
    server_span = by_name(sdk_spans.get_finished_spans(), "tools/call add")
    assert ours.parent is not None and ours.parent.span_id == server_span.context.span_id
    assert telemetry_capture.calls("add") == 1.0

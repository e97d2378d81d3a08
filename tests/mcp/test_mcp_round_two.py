"""MCP, round two: the caller's identity from the request _meta, tools/list left as registered, refused arguments, uninstrument."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import telemetry
from telemetry import conventions as c

from optional import require

tmcp: Any = None
Client: Any = None


@pytest.fixture(autouse=True)
def _sdk() -> Iterator[None]:
    """The SDK is imported by the test that runs (a skip without it, a failure when CI=true)."""
    global tmcp, Client
    require("mcp", "mcp")
    import mcp

    import telemetry.mcp

    tmcp, Client = telemetry.mcp, mcp.Client
    yield


def get_state(key: str) -> dict[str, Any]:
    """Read a value and its version token."""
    return {"ok": True, "key": key, "version": "v1"}


def put_state(key: str, value: list[int]) -> dict[str, Any]:
    """Write a value."""
    return {"ok": True, "key": key, "version": "v2"}


def server_of() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("round two")
    server.add_tool(get_state, annotations=ToolAnnotations(title="Get", read_only_hint=True))
    server.add_tool(put_state)
    return server


async def full_listing(server: Any) -> str:
    """Everything tools/list tells the client, annotations and _meta included, as JSON text."""
    async with Client(server, mode="legacy") as client:
        tools = await client.list_tools()
    return json.dumps([t.model_dump(mode="json", by_alias=True) for t in tools.tools], sort_keys=True)


async def test_request_meta_names_the_call_the_run_and_the_agent(telemetry_capture: Any) -> None:
    """trace_meta() inside the caller's agent and call-id blocks; the server's span carries all three."""
    server = server_of()
    tmcp.instrument_server(server)
    async with Client(server, mode="legacy") as client:
        with telemetry.agent("planner", conversation_id="run-42"), telemetry.tool_call_id("call-7"):
            meta = tmcp.trace_meta()
        await client.call_tool("get_state", {"key": "plan"}, meta=meta)
        await client.call_tool("put_state", {"key": "plan", "value": [1]})
    a = dict(telemetry_capture.span("get_state").attributes)
    assert (a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_AGENT_ID]) == ("call-7", "run-42", "planner")
    assert meta[c.MCP_META_TOOL_CALL_ID] == "call-7"
    plain = dict(telemetry_capture.span("put_state").attributes)  # no _meta: nothing made up
    assert not {c.GEN_AI_TOOL_CALL_ID, c.GEN_AI_CONVERSATION_ID, c.GEN_AI_AGENT_ID} & set(plain)


async def test_instrument_server_leaves_tools_list_as_registered_unless_asked(telemetry_capture: Any) -> None:
    """No options: tools/list is byte-identical, annotations included. A kind given for a tool publishes its hints."""
    before = await full_listing(server_of())
    server = server_of()
    tmcp.instrument_server(server)
    assert await full_listing(server) == before
    asked = server_of()
    tmcp.instrument_server(asked, {"put_state": {"kind": "write", "idempotent": True}})
    tools = {t["name"]: t for t in json.loads(await full_listing(asked))}
    assert tools["put_state"]["annotations"] == {
        "destructiveHint": True, "idempotentHint": True, "openWorldHint": None, "readOnlyHint": False, "title": None}
    assert tools["get_state"] == {t["name"]: t for t in json.loads(before)}["get_state"]


async def test_arguments_the_sdk_refuses_are_invalid_argument(telemetry_capture: Any) -> None:
    """A call whose arguments fail the input schema never reaches the tool: ok/invalid_argument, client told as before."""
    server = server_of()
    tmcp.instrument_server(server)
    async with Client(server, mode="legacy") as client:
        with telemetry.tool_call_id("bad-1"):
            result = await client.call_tool("put_state", {"key": "plan", "value": "not a list"}, meta=tmcp.trace_meta())
    assert result.is_error is True
    a = dict(telemetry_capture.span("put_state").attributes)
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) == (c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "bad-1")
    assert a[c.ERROR_TYPE].endswith("ToolError")
    assert telemetry_capture.calls("put_state", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_INVALID_ARGUMENT) == 1


async def test_uninstrument_server_restores_every_tool(telemetry_capture: Any) -> None:
    """After uninstrument_server: the same functions, the same tools/list, no spans; instrumenting again works."""
    server = server_of()
    fns = {r.name: r.fn for r in server._tool_manager.list_tools()}
    before = await full_listing(server)
    tmcp.instrument_server(server, {"put_state": {"kind": "write"}})
    assert sorted(tmcp.uninstrument_server(server)) == ["get_state", "put_state"]
    assert {r.name: r.fn for r in server._tool_manager.list_tools()} == fns
    assert await full_listing(server) == before
    async with Client(server, mode="legacy") as client:
        await client.call_tool("get_state", {"key": "plan"})
    assert telemetry_capture.spans("get_state") == []
    tmcp.instrument_server(server)
    async with Client(server, mode="legacy") as client:
        await client.call_tool("get_state", {"key": "plan"})
    assert len(telemetry_capture.spans("get_state")) == 1

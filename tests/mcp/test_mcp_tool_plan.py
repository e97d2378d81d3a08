"""The tool-plan meta tool, read through the mcp SDK's real client: what each tool is and how to use it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

import telemetry
import telemetry.mcp
from telemetry import conventions as c
from telemetry.exceptions import ConfigurationError
from telemetry.guards import (
    IdempotencyKeys,
    Planner,
    SQLiteStore,
    StateStore,
    reads_cache,
    success,
    verification_required,
)
from telemetry.mcp import ToolContract, expose_tool_plan
from telemetry.testing import Capture

import mcp_support  # noqa: F401  (skips without the SDK, fails in CI)


def build(tmp_path: Path) -> MCPServer:
    """A server with a versioned pair, a plan/commit pair, a keyed charge, a cached read and a write
    whose result asks for verification through it."""
    store = SQLiteStore(tmp_path / "plan.sqlite3")
    state = StateStore(store)
    planner = Planner(state)
    keys = IdempotencyKeys(store)
    cache: dict[str, str] = {}
    server = MCPServer("plan")
    for method in (state.read_state, state.write_state, planner.plan_change, planner.commit_plan):
        server.add_tool(method, name=getattr(method, telemetry.instrument.SPEC_ATTRIBUTE).name)

    @telemetry.mcp.tool(server, kind="write")
    @keys.idempotent(key_param="request_id")
    def charge_card(order_id: str, amount_cents: int, request_id: str) -> dict[str, Any]:
        """Charge once per request id."""
        return {"ok": True, "charge_id": f"ch-{order_id}"}

    @telemetry.mcp.tool(server, kind="read")
    @reads_cache
    def get_cached_email(user: str) -> dict[str, Any]:
        """The email as the cache has it."""
        return {"ok": True, "email": cache.get(user)}

    @telemetry.mcp.tool(server, kind="write")
    def set_email(user: str, email: str) -> dict[str, Any]:
        """Set the email; verify it with the read the result names."""
        cache[user] = email
        return success(user=user, verification_required=verification_required(
            "get_cached_email", arguments={"user": user}, compare={"email": email}))

    telemetry.mcp.instrument_server(server)
    expose_tool_plan(server, {"set_email": ToolContract(verify="get_cached_email")})
    return server


async def _plan(server: MCPServer) -> tuple[dict[str, Any], Any]:
    async with Client(server, mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool(c.TOOL_PLAN_NAME, {})
    assert not result.is_error
    document = result.structured_content or json.loads(result.content[0].text)
    return document, listed


async def test_the_meta_tool_lists_every_tool_with_its_sequence(tmp_path: Path) -> None:
    """kind, discover -> call -> verify, idempotency and plan/commit come from the specs the server holds."""
    document, listed = await _plan(build(tmp_path))
    assert document["schema"] == c.PLAN_SCHEMA_ID
    meta = listed[c.TOOL_PLAN_NAME]
    assert meta.annotations.read_only_hint is True and (meta.meta or {}).get(c.MCP_META_TOOL_PLAN) is True
    plan = {t["name"]: t for t in document["tools"]}
    assert c.TOOL_PLAN_NAME not in plan  # the plan describes the other tools
    assert set(plan) == set(listed) - {c.TOOL_PLAN_NAME}
    write = plan["write_state"]
    assert write["kind"] == c.KIND_WRITE and write["instrumented"] is True
    assert [(s["step"], s["tool"]) for s in write["sequence"]] == [
        ("discover", "read_state"), ("call", "write_state"), ("verify", None)]
    assert write["sequence"][-1]["by"] == "server"  # write_state reads each write back itself (readback=)
    assert write["idempotent"] == {"is": True, "how": c.IDEMPOTENT_BY_VERSION, "parameter": "expected_version"}
    commit = plan["commit_plan"]
    assert commit["plan_commit"] == {"plan": "plan_change", "commit": "commit_plan"}
    assert commit["sequence"][0] == {"step": "discover", "tool": "plan_change",
                                     "why": "returns the plan_id this call commits"}
    assert plan["charge_card"]["idempotent"] == {"is": True, "how": c.IDEMPOTENT_BY_KEY, "parameter": "request_id"}
    assert plan["read_state"]["idempotent"]["how"] == c.IDEMPOTENT_BY_READ
    assert plan["get_cached_email"]["reads_cache"] is True and plan["read_state"]["reads_cache"] is False
    verify = plan["set_email"]["sequence"][-1]
    assert (verify["step"], verify["tool"], verify["by"]) == ("verify", "get_cached_email", "caller")
    assert plan["set_email"]["idempotent"]["is"] is False


async def test_a_write_result_carries_the_verification_and_the_span_its_names(
        tmp_path: Path, telemetry_capture: Capture) -> None:
    """The result tells the model what to read and compare; the span keeps the tool and field names only."""
    async with Client(build(tmp_path), mode="legacy") as client:
        result = await client.call_tool("set_email", {"user": "u-1", "email": "new@example.com"})
    body = result.structured_content
    assert body is not None
    assert body[c.ENVELOPE_VERIFICATION_REQUIRED] == {
        c.VERIFY_TOOL: "get_cached_email", c.VERIFY_ARGUMENTS: {"user": "u-1"}, c.VERIFY_COMPARE: {"email": "new@example.com"}}
    attributes = telemetry_capture.span("set_email").attributes or {}
    assert attributes[c.TOOL_VERIFICATION_TOOL] == "get_cached_email"
    assert list(attributes[c.TOOL_VERIFICATION_COMPARE]) == ["email"]
    assert "new@example.com" not in json.dumps({k: str(v) for k, v in attributes.items()})


def test_contracts_naming_missing_tools_are_refused(tmp_path: Path) -> None:
    """A contract for a tool (or naming a verify tool) the server does not have fails with the names."""
    server = MCPServer("s")

    @telemetry.mcp.tool(server, kind="read")
    def get_x() -> dict[str, Any]:
        return {}

    with pytest.raises(ConfigurationError, match="'nope'.*get_x"):
        expose_tool_plan(server, {"get_x": ToolContract(verify="nope")})
    with pytest.raises(ConfigurationError, match="tool 'ghost'"):
        expose_tool_plan(server, {"ghost": ToolContract()})
    expose_tool_plan(server)
    with pytest.raises(ConfigurationError, match="already has a tool named 'tool_plan'"):
        expose_tool_plan(server)


@pytest.mark.parametrize("bad", ["", "two words", "x" * 200, "a\nb"])
def test_verification_required_refuses_what_is_not_a_tool_name(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a tool name"):
        verification_required(bad, arguments={}, compare={"f": 1})
    with pytest.raises(ValueError, match="at least one field"):
        verification_required("get_x", arguments={}, compare={})
    with pytest.raises(ValueError, match="is not a field name"):
        verification_required("get_x", arguments={}, compare={"bad field": 1})

"""examples/mcp_guarded_server.py driven by a real MCP client session: refusals a model can act on."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import MCPServer

from telemetry import conventions as c

import mcp_support  # noqa: F401  (skips without the SDK, fails in CI)
from module_files import import_module_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_guarded_server.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example module, imported from its file."""
    return import_module_file(EXAMPLE, "mcp_guarded_server_example")


@pytest.fixture
def server(example: ModuleType, tmp_path: Path) -> tuple[MCPServer, list[dict[str, Any]]]:
    outbox: list[dict[str, Any]] = []
    return example.build_server(tmp_path / "crew.sqlite3", outbox), outbox


async def test_every_tool_tells_the_model_about_tokens_and_refusals(server: Any) -> None:
    """tools/list: each tool carries its model-facing description and the annotations from its hints."""
    async with Client(server[0], mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= {"read_state", "write_state", "delegate", "get_objective", "send_customer_message"}
    assert all(t.annotations is not None and t.annotations.read_only_hint is not None for t in tools.values())
    assert "opaque token" in tools["read_state"].description
    write = tools["write_state"].description
    assert c.OUTCOME_REJECTED_STALE_VERSION in write and "expected_version=current_version" in write
    assert c.OUTCOME_CONSTRAINT_MISSING in tools["delegate"].description
    assert c.OUTCOME_STALE_POLICY in tools["send_customer_message"].description
    assert tools["read_state"].annotations.read_only_hint is True
    assert tools["write_state"].annotations.destructive_hint is True


async def test_delegate_schema_spells_out_each_item_shape(server: Any) -> None:
    """tools/list: delegate's list parameters are typed objects with required keys, not free-form dicts."""
    async with Client(server[0], mode="legacy") as client:
        schema = next(t for t in (await client.list_tools()).tools if t.name == "delegate").input_schema
    shapes = {name: (set(d["properties"]), set(d["required"])) for name, d in schema["$defs"].items()}
    assert shapes["Constraint"] == ({"id", "text"}, {"id", "text"})
    assert shapes["Waiver"] == ({"id", "reason"}, {"id", "reason"})
    assert shapes["AcceptanceCriterion"] == ({"check", "constraint_id"}, {"check", "constraint_id"})
    assert schema["properties"]["waived_constraints"]["items"] == {"$ref": "#/$defs/Waiver"}


async def test_stale_write_is_refused_with_what_to_redo_against(server: Any, telemetry_capture: Any) -> None:
    """Two agents write from the same read: the second is refused with the current value and version, in one trace."""
    tracer = telemetry_capture.runtime.tracer
    async with Client(server[0], mode="legacy") as client:
        with tracer.start_as_current_span("crew run") as run:
            read = (await client.call_tool("read_state", {"key": "plan"})).structured_content
            assert read["version"] == "absent"
            first = await client.call_tool(
                "write_state", {"key": "plan", "value": {"step": 1}, "expected_version": "absent", "agent_id": "a"}
            )
            stale = await client.call_tool(
                "write_state", {"key": "plan", "value": {"step": 9}, "expected_version": "absent", "agent_id": "b"}
            )
    assert first.structured_content["ok"] is True
    refusal = stale.structured_content
    assert refusal["error"] == c.OUTCOME_REJECTED_STALE_VERSION and refusal["retry"] is True
    assert refusal["current_value"] == {"step": 1}
    assert refusal["current_version"] == first.structured_content["version"]
    span = telemetry_capture.spans("write_state")[-1]
    assert span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    assert span.attributes[c.TOOL_OUTCOME] == c.OUTCOME_REJECTED_STALE_VERSION
    assert span.attributes[c.STATE_VERSION_CURRENT] == refusal["current_version"]
    assert {s.context.trace_id for s in telemetry_capture.spans()} == {run.get_span_context().trace_id}
    assert telemetry_capture.calls("write_state", outcome=c.OUTCOME_REJECTED_STALE_VERSION) == 1.0


async def test_dropped_constraint_is_refused_then_carried(server: Any, telemetry_capture: Any) -> None:
    """A delegation that drops an origin constraint is refused naming it; carrying it verbatim succeeds."""
    budget = {"id": "budget", "text": "spend under 100 EUR"}
    async with Client(server[0], mode="legacy") as client:
        await client.call_tool(
            "register_task", {"task_id": "trip", "objective": "book a trip", "constraints": [budget], "agent_id": "lead"}
        )
        args: dict[str, Any] = {
            "subtask": "book the hotel",
            "origin_task_id": "trip",
            "acceptance_criteria": [],
            "waived_constraints": [],
            "agent_id": "lead",
        }
        dropped = (await client.call_tool("delegate", {**args, "constraints": []})).structured_content
        carried = (await client.call_tool("delegate", {**args, "constraints": [budget]})).structured_content
    assert dropped["error"] == c.OUTCOME_CONSTRAINT_MISSING and dropped["missing_ids"] == ["budget"]
    assert dropped["required_constraints"] == [budget]
    assert carried["ok"] is True and carried["hop"] == 1 and carried["carried"] == ["budget"]
    outcomes = [s.attributes[c.TOOL_OUTCOME] for s in telemetry_capture.spans("delegate")]
    assert outcomes == [c.OUTCOME_CONSTRAINT_MISSING, c.OUTCOME_OK]


async def test_send_against_a_superseded_policy_is_refused_with_the_current_one(
    server: Any, telemetry_capture: Any
) -> None:
    """A message drafted against a superseded refund policy is not sent; the refusal carries the new policy."""
    mcp_server, outbox = server
    async with Client(mcp_server, mode="legacy") as client:
        published = await client.call_tool("publish_objective", {"task_id": "refund-policy", "text": "refund 30 days"})
        old = published.structured_content["version"]
        await client.call_tool("get_objective", {"task_id": "refund-policy", "agent_id": "support"})
        await client.call_tool(
            "supersede_objective",
            {"task_id": "refund-policy", "text": "refund 14 days", "reason": "legal", "expected_version": old},
        )
        message = {"ticket_id": "T-1", "body": "30 days", "agent_id": "support"}
        stale = (await client.call_tool("send_customer_message", {**message, "policy_version": old})).structured_content
        fresh = await client.call_tool(
            "send_customer_message", {**message, "body": "14 days", "policy_version": stale["current_version"]}
        )
    assert stale["error"] == c.OUTCOME_STALE_POLICY and stale["current_policy"] == "refund 14 days"
    assert fresh.structured_content["ok"] is True
    assert [m["body"] for m in outbox] == ["14 days"]
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "send_customer_message"}) == 1.0
    assert telemetry_capture.calls("send_customer_message") == 2.0


async def test_every_refusal_a_client_can_provoke_is_explained_in_the_tool_description(server: Any) -> None:
    """Each refusal code a tool returns (driven for real) is named, with what to do, in that tool's description."""
    refused: set[tuple[str, str]] = set()
    budget = {"id": "budget", "text": "spend under 100 EUR"}
    send = {"ticket_id": "T-1", "body": "hi", "agent_id": "support", "policy_version": "v?"}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_task", {"task_id": "nope"}),
        ("get_objective", {"task_id": "refund-policy", "agent_id": "support"}),
        ("supersede_objective", {"task_id": "refund-policy", "text": "t", "reason": "r", "expected_version": "v?"}),
        ("send_customer_message", send),
        ("write_state", {"key": "k", "value": 1, "expected_version": "absent"}),
        ("write_state", {"key": "k", "value": 2, "expected_version": "absent"}),
        ("register_task", {"task_id": "trip", "objective": "book", "constraints": [budget], "agent_id": "lead"}),
        ("register_task", {"task_id": "trip", "objective": "other", "constraints": [], "agent_id": "lead"}),
        ("delegate", {"subtask": "s", "origin_task_id": "trip", "acceptance_criteria": [], "waived_constraints": [],
                      "constraints": [], "agent_id": "lead"}),
        ("delegate", {"subtask": "s", "origin_task_id": "nope", "acceptance_criteria": [], "waived_constraints": [],
                      "constraints": [], "agent_id": "lead"}),
        ("publish_objective", {"task_id": "refund-policy", "text": "refund 30 days"}),
        ("publish_objective", {"task_id": "refund-policy", "text": "refund 14 days"}),
        ("supersede_objective", {"task_id": "refund-policy", "text": "t", "reason": "r", "expected_version": "v?"}),
        ("send_customer_message", send),
    ]
    async with Client(server[0], mode="legacy") as client:
        descriptions = {t.name: t.description or "" for t in (await client.list_tools()).tools}
        for tool, args in calls:
            result = (await client.call_tool(tool, args)).structured_content
            if result is not None and result.get("ok") is False:
                refused.add((tool, result["error"]))
    assert {("get_objective", c.OUTCOME_NOT_FOUND), ("publish_objective", c.OUTCOME_INVALID_ARGUMENT),
            ("supersede_objective", c.OUTCOME_REJECTED_STALE_VERSION)} <= refused
    unexplained = sorted((tool, code) for tool, code in refused if f"error={code}" not in descriptions[tool])
    assert not unexplained, f"refusals the description does not explain: {unexplained}"


async def test_the_script_serves_over_stdio_to_a_real_client_session(tmp_path: Path) -> None:
    """`python examples/mcp_guarded_server.py` speaks MCP on stdout: list, a stale refusal, spans on disk."""
    traces = tmp_path / "traces"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLE), "--db", str(tmp_path / "crew.sqlite3"), "--traces", str(traces)],
        cwd=str(tmp_path),
    )
    write = {"key": "plan", "value": 1, "expected_version": "absent", "agent_id": "a"}
    with anyio.fail_after(60), (tmp_path / "server.stderr").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams, ClientSession(*streams) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            first = await session.call_tool("write_state", write)
            stale = await session.call_tool("write_state", {**write, "agent_id": "b"})
    assert "send_customer_message" in names and first.structured_content["ok"] is True
    assert stale.structured_content["error"] == c.OUTCOME_REJECTED_STALE_VERSION
    assert "metrics: http://127.0.0.1:" in (tmp_path / "server.stderr").read_text()
    assert c.OUTCOME_REJECTED_STALE_VERSION in "".join(p.read_text() for p in traces.glob("*.jsonl"))

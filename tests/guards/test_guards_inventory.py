"""Scoped inventory: tools outside a credential's scopes are absent, and entries carry the hints."""

from __future__ import annotations

import pytest

from telemetry import ConfigurationError, GuardError
from telemetry import conventions as c
from telemetry.guards import Planner, StateStore, ToolRegistry, open_store
from telemetry.testing import Capture


@pytest.fixture
def registry(store_url: str) -> ToolRegistry:
    state = StateStore(open_store(store_url))
    planner = Planner(state)
    registry = ToolRegistry()
    registry.register(state.read_state, scopes=["state:read"])
    registry.register(state.write_state, scopes=["state:read", "state:write"])
    registry.register(state.force_write_state, scopes=["operator"])
    registry.register(planner.plan_change, scopes=["catalog:plan"])
    registry.register(planner.commit_plan, scopes=["catalog:plan", "catalog:commit"])
    return registry


def test_inventory_lists_only_what_the_scopes_allow(registry: ToolRegistry) -> None:
    """A read-only credential sees read_state and nothing else; a fuller one sees more."""
    assert [e["name"] for e in registry.inventory(["state:read"])] == ["read_state"]
    assert [e["name"] for e in registry.inventory(["state:read", "state:write", "catalog:plan"])] == [
        "plan_change",
        "read_state",
        "write_state",
    ]
    assert registry.inventory([]) == []


def test_entries_carry_the_tool_annotations(registry: ToolRegistry) -> None:
    """Each entry has the read-only, destructive and idempotent hints from @instrument_tool, and a description."""
    entries = {e["name"]: e for e in registry.inventory(["state:read", "state:write"])}
    assert entries["read_state"]["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
    assert entries["write_state"]["annotations"] == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
    assert entries["write_state"]["kind"] == c.KIND_WRITE
    assert entries["read_state"]["description"].startswith("Read a shared value and its version token.")
    assert entries["write_state"]["required_scopes"] == ["state:read", "state:write"]


def test_out_of_scope_tool_is_absent_not_denied(registry: ToolRegistry) -> None:
    """Looking up a tool outside the scopes answers exactly as for a name that does not exist."""
    tools = registry.scoped(["state:read"])
    assert tools.get("read_state") is not None
    assert tools.get("force_write_state") is None
    assert tools.get("no_such_tool") is None
    assert "force_write_state" not in tools and "read_state" in tools
    assert list(tools.callables()) == ["read_state"]


def test_list_tools_is_an_instrumented_tool_without_a_scopes_parameter(registry: ToolRegistry, telemetry_capture: Capture) -> None:
    """The agent-facing list_tools takes no scopes (they are bound server-side) and is recorded."""
    import inspect

    tools = registry.scoped(["catalog:plan"])
    assert list(inspect.signature(tools.list_tools).parameters) == []
    listed = tools.list_tools()
    assert listed["ok"] and [t["name"] for t in listed["tools"]] == ["plan_change"]
    assert telemetry_capture.span("list_tools").attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK


def test_registration_mistakes_fail_loudly(registry: ToolRegistry) -> None:
    """Uninstrumented tools, duplicate names and a scope given as one string are refused at once."""

    def plain() -> None: ...

    with pytest.raises(ConfigurationError, match="not instrumented"):
        registry.register(plain, scopes=[])
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(registry.scoped([]).list_tools, scopes=[], name="read_state")
    with pytest.raises(GuardError, match="not one string"):
        registry.inventory("state:read")

"""Schemas of Python tools are the ones the MCP SDK would publish for the same function."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from mcp.server.mcpserver.tools.base import Tool
from pydantic import Field

from telemetry.audit import audit_tools
from telemetry.audit._schema import input_schema
from telemetry.guards._state import JSONValue

import audit_support  # noqa: F401  (skips without the extra, fails in CI)


def write(key: str, value: JSONValue, expected_version: str, agent_id: str | None = None) -> dict[str, Any]:
    """Write a value."""
    return {}


def bounded(limit: Annotated[int, Field(ge=1, le=50, description="At most this many rows (1-50).")] = 20,
            status: Literal["open", "closed"] = "open") -> list[str]:
    """List tickets."""
    return []


def untyped(a, b=3):  # type: ignore[no-untyped-def]
    """No annotations at all."""


@pytest.mark.parametrize("func", [write, bounded, untyped])
def test_schema_matches_the_sdk(func: Any) -> None:
    """input_schema(f) is exactly MCPServer's inputSchema for f."""
    schema, notes = input_schema(func, func.__name__)
    assert schema == Tool.from_function(func).parameters
    assert notes == []


def test_bounds_and_enums_in_the_schema_satisfy_the_lint() -> None:
    """A bounded, described number and a Literal raise no SCH201/SCH202/SCH203 for those parameters."""
    report = audit_tools([bounded])
    flagged = {(f.code, f.parameter) for f in report.tools[0].findings}
    assert not flagged & {("SCH201", "limit"), ("SCH203", "limit"), ("SCH202", "status")}

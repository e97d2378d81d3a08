"""The project's guarded tools and the MCP example answer yes wherever the check applies.

The few noes that remain are real and named here: nothing in these surfaces scopes a credential
(only a ScopedTools inventory does), ``delegate`` takes an optional child ``task_id`` (a retry
without it creates a second child), the guarded send and charge declare no read-back and the send
no idempotency key, and the profile ``update_email`` (the guarded side of the stale-cache story)
overwrites without a version.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from telemetry.audit import NO, NOT_APPLICABLE, YES, audit_tools
from telemetry.audit._model import CHECKS, IDEMPOTENT, READBACK_VERIFIED, SCOPED, VERSION_BOUND
from telemetry.demo._surfaces import guarded_tools
from telemetry.demo._world import World
from telemetry.guards import ToolRegistry

import audit_support  # noqa: F401  (skips without the extra, fails in CI)
from audit_support import EXAMPLE, world  # noqa: F401  (fixture)
from module_files import import_module_file

REAL_NOES = {
    ("delegate", IDEMPOTENT),
    ("send_customer_message", IDEMPOTENT),
    ("send_customer_message", READBACK_VERIFIED),
    ("charge_card", READBACK_VERIFIED),
    ("update_email", IDEMPOTENT),
    ("update_email", VERSION_BOUND),
}


def _noes(report: object) -> set[tuple[str, str]]:
    return {(t.tool.name, c) for t in report.tools for c in CHECKS if t.answers[c].verdict == NO}  # type: ignore[attr-defined]


def test_guarded_surface_answers_yes_except_the_named_real_noes(world: World) -> None:
    """Every applicable answer of the crew's guarded tools is yes, but for scoping and the named noes."""
    report = audit_tools(guarded_tools(world))
    names = {t.tool.name for t in report.tools}
    assert {"read_state", "write_state", "plan_change", "commit_plan", "register_task", "delegate",
            "publish_objective", "supersede_objective", "charge_card", "send_customer_message"} <= names
    assert "force_write_state" not in names  # an operator's tool, left out of the agent surface
    assert _noes(report) == {(n, SCOPED) for n in names} | REAL_NOES
    by_name = {t.tool.name: t for t in report.tools}
    write = by_name["write_state"].answers
    assert [write[c].verdict for c in CHECKS[1:]] == [YES, YES, NOT_APPLICABLE, YES, YES, YES]
    commit = by_name["commit_plan"].answers
    assert [commit[c].verdict for c in CHECKS[1:]] == [YES, YES, YES, YES, YES, YES]
    assert "IdempotencyKeys deduplicates on 'request_id'" in by_name["charge_card"].answers[IDEMPOTENT].evidence
    assert by_name["read_state"].kind_basis == "declared by @instrument_tool(kind='read')"
    critical = [(t.tool.name, f.code) for t, f in report.findings() if f.severity == "critical"]
    assert critical == [("update_email", "AUD103")]


def test_a_scoped_inventory_answers_scoped_yes(world: World) -> None:
    """Tools handed out through registry.scoped(...) are scoped, with the scopes as evidence."""
    registry = ToolRegistry()
    registry.register(world.state.read_state, scopes=["state:read"])
    registry.register(world.state.write_state, scopes=["state:write"])
    registry.register(world.profiles.update_email, scopes=[])
    report = audit_tools(registry.scoped(["state:read", "state:write"]))
    scoped = {t.tool.name: t.answers[SCOPED] for t in report.tools}
    assert scoped["write_state"].verdict == YES and "state:write" in scoped["write_state"].evidence
    assert scoped["read_state"].verdict == YES and scoped["list_tools"].verdict == YES
    assert scoped["update_email"].verdict == NO  # a write offered to every credential
    assert "registered with no scopes" in scoped["update_email"].evidence


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return import_module_file(EXAMPLE, "mcp_guarded_server_audit")


def test_mcp_example_server_answers_yes_wherever_applicable(example: ModuleType, tmp_path: Path) -> None:
    """The example MCPServer, listed in-process: our specs behind its tools give yes where they apply."""
    report = audit_tools(example.build_server(tmp_path / "crew.sqlite3"), label="example")
    names = {t.tool.name for t in report.tools}
    assert len(names) == 9
    assert _noes(report) == {(n, SCOPED) for n in names} | {
        ("delegate", IDEMPOTENT), ("send_customer_message", IDEMPOTENT), ("send_customer_message", READBACK_VERIFIED)}
    assert not report.failed()  # no critical finding: every write is version-bound or create-only
    send = next(t for t in report.tools if t.tool.name == "send_customer_message")
    assert send.tool.description.startswith("Send a message to a customer")  # the listed description
    assert send.tool.source is not None and send.tool.source.file == str(EXAMPLE)

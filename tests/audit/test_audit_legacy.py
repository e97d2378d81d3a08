"""The demo's legacy tools get the noes their stories are about, each with evidence and a fix."""

from __future__ import annotations

from telemetry.audit import NO, audit_tools
from telemetry.audit._model import (
    ACTIONABLE_ERRORS,
    CHECKS,
    IDEMPOTENT,
    PREVIEWABLE,
    READBACK_VERIFIED,
    SCOPED,
    SEMANTICALLY_OBSERVABLE,
    VERSION_BOUND,
)
from telemetry.demo._surfaces import legacy_tools
from telemetry.demo._world import World

import audit_support  # noqa: F401  (skips without the extra, fails in CI)
from audit_support import world  # noqa: F401  (fixture)

EXPECTED_NOES = {
    "legacy_get": {ACTIONABLE_ERRORS},
    "legacy_set": {IDEMPOTENT, VERSION_BOUND, ACTIONABLE_ERRORS},
    "legacy_delegate": {IDEMPOTENT, READBACK_VERIFIED, ACTIONABLE_ERRORS},
    "legacy_send_customer_message": {IDEMPOTENT, VERSION_BOUND, READBACK_VERIFIED, ACTIONABLE_ERRORS},
    "legacy_charge_card": {IDEMPOTENT, READBACK_VERIFIED, ACTIONABLE_ERRORS},
    "legacy_update_email": {IDEMPOTENT, VERSION_BOUND, ACTIONABLE_ERRORS},
    "legacy_reprice_collection": {IDEMPOTENT, VERSION_BOUND, PREVIEWABLE, READBACK_VERIFIED, ACTIONABLE_ERRORS},
    "legacy_fetch_rates": {ACTIONABLE_ERRORS},
}
"""Every legacy tool also says nothing of its errors (actionable_errors): none returns a refusal envelope."""


def test_each_legacy_tool_gets_its_noes(world: World) -> None:
    """Unversioned set, free-text hand-off, unguarded send and charge, bulk reprice: the expected noes."""
    report = audit_tools(legacy_tools(world))
    got = {t.tool.name: {c for c in CHECKS if t.answers[c].verdict == NO} - {SCOPED} for t in report.tools}
    assert got == EXPECTED_NOES
    for t in report.tools:
        assert t.answers[SEMANTICALLY_OBSERVABLE].verdict != NO  # instrumented: that is how forensics sees them
        for check in CHECKS:
            answer = t.answers[check]
            if answer.verdict == NO:
                assert answer.evidence and answer.fix, (t.tool.name, check)
    assert report.failed()  # the default gate: critical findings


def test_legacy_findings_name_the_failure_and_the_guard_that_fixes_it(world: World) -> None:
    """The critical findings are the stale write, the stale send and the lossy hand-off."""
    report = audit_tools(legacy_tools(world))
    by_tool = {t.tool.name: t for t in report.tools}
    critical = {(t.tool.name, f.code) for t, f in report.findings() if f.severity == "critical"}
    assert critical == {
        ("legacy_set", "AUD103"),
        ("legacy_update_email", "AUD103"),
        ("legacy_reprice_collection", "AUD103"),
        ("legacy_send_customer_message", "SCH207"),
        ("legacy_delegate", "SCH208"),
    }
    charge = by_tool["legacy_charge_card"].answers[IDEMPOTENT]
    assert "takes 'request_id', but no idempotency guard deduplicates on it" in charge.evidence
    assert "IdempotencyKeys" in (charge.fix or "")
    send = by_tool["legacy_send_customer_message"].answers[VERSION_BOUND]
    assert "guarded_send" in (send.fix or "")
    reprice = by_tool["legacy_reprice_collection"]
    assert "Planner" in (reprice.answers[PREVIEWABLE].fix or "")
    assert {(f.code, f.parameter) for f in reprice.findings} >= {("SCH201", "discount_pct")}
    assert by_tool["legacy_set"].kind_basis == "declared by @instrument_tool(kind='write')"

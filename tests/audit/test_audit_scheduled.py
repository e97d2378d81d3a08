"""The audit's previewable check accepts a scheduled send as the preview of a send: declared
(a review window longer than 0 s) and in traces (calls that scheduled instead of sending)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from telemetry import configure, instrument_tool
from telemetry import conventions as c
from telemetry.audit import NO, YES, audit_tools, run_audit
from telemetry.audit._model import PREVIEWABLE
from telemetry.audit._report import TargetInfo
from telemetry.audit._targets import tools_of
from telemetry.audit._traces import collect
from telemetry.guards import Objectives, ScheduledSends, SQLiteStore

import audit_support  # noqa: F401  (skips without the extra, fails in CI)

POLICY = "push-policy"


def _sends(tmp_path: Path) -> tuple[Objectives, ScheduledSends]:
    store = SQLiteStore(tmp_path / "guards.db")
    objectives = Objectives(store)
    return objectives, ScheduledSends(store, objectives)


def _broadcasts(sends: ScheduledSends) -> list[Any]:
    @instrument_tool(kind=c.KIND_SEND)
    @sends.schedule_send(policy_task_id=POLICY, review_seconds=900)
    def broadcast_push(segment: str, body: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True}

    @instrument_tool(kind=c.KIND_SEND)
    @sends.schedule_send(policy_task_id=POLICY, review_seconds=0)
    def broadcast_now(segment: str, body: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True}

    @instrument_tool(kind=c.KIND_SEND)
    def broadcast_unguarded(segment: str, body: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True}

    return [broadcast_push, broadcast_now, broadcast_unguarded]


def test_a_scheduled_broadcast_is_previewable_and_a_zero_window_or_a_direct_one_is_not(tmp_path: Path) -> None:
    """Declared: 900 s window yes; 0 s window AUD104; the same broadcast sent directly AUD104."""
    _, sends = _sends(tmp_path)
    report = audit_tools(_broadcasts(sends))
    by_name = {t.tool.name: t for t in report.tools}
    push = by_name["broadcast_push"].answers[PREVIEWABLE]
    assert push.verdict == YES and "900 s review window" in push.evidence
    now = by_name["broadcast_now"]
    assert now.answers[PREVIEWABLE].verdict == NO and "0 s review window" in now.answers[PREVIEWABLE].evidence
    assert [f.code for f in now.findings if f.code == "AUD104"] == ["AUD104"]
    assert by_name["broadcast_unguarded"].answers[PREVIEWABLE].verdict == NO


def test_the_review_tools_of_a_scheduled_sends_object_are_audited(tmp_path: Path) -> None:
    _, sends = _sends(tmp_path)
    names = [t.tool.name for t in audit_tools(sends).tools]
    assert names == [c.TOOL_GET_SCHEDULED_SEND, c.TOOL_CANCEL_SCHEDULED_SEND, c.TOOL_APPROVE_SCHEDULED_SEND]


def test_traces_of_scheduled_calls_answer_previewable_yes(tmp_path: Path) -> None:
    """Traces alone: a broadcast whose calls scheduled with a window is previewable; the direct one is not."""
    objectives, sends = _sends(tmp_path)
    version = objectives.publish_objective(POLICY, "opted-in users only")["version"]
    push, _, direct = _broadcasts(sends)
    runtime = configure(service_name="audit-scheduled", traces_dir=tmp_path / "traces", registry=CollectorRegistry(),
                        install_global=False)
    try:
        push("all-users", "Summer sale", version)
        direct("all-users", "Summer sale", version)
    finally:
        runtime.shutdown()
    evidence = collect([str(tmp_path / "traces")])
    assert evidence.tools["broadcast_push"].scheduled == 1
    models = tools_of([direct], "python")
    report = run_audit(models, [TargetInfo("python", "python", len(models))], evidence)
    by_name = {t.tool.name: t.answers[PREVIEWABLE] for t in report.tools}
    assert by_name["broadcast_push"].verdict == YES and "review window" in by_name["broadcast_push"].evidence
    assert by_name["broadcast_unguarded"].verdict == NO

"""The page and the query agree: ToolSilentFailure (promtool over the shipped rules) and
`forensics silent_failures` name exactly the same (tool, outcome) pairs for the same calls.

Calls are generated (hypothesis) through real instrumented tools, exported to real trace files
and counted in a real registry; the demo's guarded and legacy counters are replayed too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

import telemetry
from telemetry import conventions as c
from telemetry.demo._alerting import samples_from_registry, would_fire
from telemetry.demo._runner import run_crew
from telemetry.forensics import open_traces
from telemetry.instrument import current_call

BEHAVIOURS = ("ok", "envelope", "refusal", "outcome_check", "readback_mismatch", "set_outcome", "forced", "raises", "http_500")
"""What one call does. Silent: outcome_check, readback_mismatch, set_outcome. Told: the rest."""


def _result(behaviour: str) -> Any:
    if behaviour == "envelope":
        return {"ok": False, "error": c.OUTCOME_TOOL_ERROR}
    if behaviour == "refusal":
        return {"ok": False, "error": c.OUTCOME_REJECTED_STALE_VERSION}
    if behaviour == "http_500":
        return {"status_code": 500}
    if behaviour == "raises":
        raise RuntimeError("boom")
    if behaviour == "set_outcome":
        current_call().set_outcome(c.OUTCOME_NOT_FOUND)
    if behaviour == "forced":
        current_call().set_outcome(c.OUTCOME_FORCED)
    return {"ok": True, "behaviour": behaviour}


def _check(call: Any, result: Any) -> str | None:
    return c.OUTCOME_POSTCONDITION_FAILED if isinstance(result, dict) and result.get("behaviour") == "outcome_check" else None


def _readback(call: Any, result: Any) -> bool | None:
    return False if isinstance(result, dict) and result.get("behaviour") == "readback_mismatch" else True


def _tools(names: set[str]) -> dict[str, Any]:
    out = {}
    for name in sorted(names):
        def tool(behaviour: str) -> Any:
            return _result(behaviour)
        out[name] = telemetry.instrument_tool(tool, name=name, kind="write", outcome=_check, readback=_readback)
    return out


def _run(calls: list[tuple[str, str]], traces: Path) -> list[Any]:
    """Make the calls under a real runtime; return the final samples (read before shutdown)."""
    runtime = telemetry.configure(service_name="agree", traces_dir=traces, registry=CollectorRegistry())
    tools = _tools({name for name, _ in calls})
    try:
        for name, behaviour in calls:
            try:
                tools[name](behaviour)
            except RuntimeError:
                pass
        runtime.force_flush()
        return samples_from_registry(runtime.registry)
    finally:
        runtime.shutdown()


def _paged(samples: list[Any]) -> set[tuple[str | None, str | None]]:
    return {(a.tool, a.labels.get(c.LABEL_OUTCOME)) for a in would_fire(samples)
            if a.name == c.ALERT_SILENT_FAILURE}


def _queried(traces: Path) -> set[tuple[str | None, str | None]]:
    with open_traces([traces]) as f:
        return {(r["tool_name"], r["outcome"]) for r in f.run("silent_failures")}


TOOLS = ("alpha", "beta", "gamma")
_mix = st.lists(st.tuples(st.sampled_from(TOOLS), st.sampled_from(BEHAVIOURS)), min_size=1, max_size=40)


# Each example runs several independent mixes side by side, each on tools of its own (alpha_0,
# alpha_1, ...): the alert and the query group by tool, so the mixes cannot see each other, and one
# runtime, one promtool replay and one load check them all (a replay per mix cost most of a second).
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_mix, min_size=2, max_size=3))
def test_the_alert_and_the_query_name_the_same_silent_failures(tmp_path_factory: pytest.TempPathFactory,
                                                              mixes: list[list[tuple[str, str]]]) -> None:
    """For any mix of told and silent failures, promtool's pages equal the query's (tool, outcome) rows."""
    traces = tmp_path_factory.mktemp("agree")
    calls = [(f"{name}_{i}", behaviour) for i, mix in enumerate(mixes) for name, behaviour in mix]
    samples = _run(calls, traces)
    queried, paged = _queried(traces), _paged(samples)
    for i, mix in enumerate(mixes):
        expected = {(f"{name}_{i}", {"outcome_check": c.OUTCOME_POSTCONDITION_FAILED,
                                     "readback_mismatch": c.OUTCOME_READBACK_MISMATCH,
                                     "set_outcome": c.OUTCOME_NOT_FOUND}[b]) for name, b in mix
                    if b in ("outcome_check", "readback_mismatch", "set_outcome")}
        mine = {f"{name}_{i}" for name in TOOLS}
        assert {row for row in queried if row[0] in mine} == expected, mix
        assert {row for row in paged if row[0] in mine} == expected, mix
    assert {tool for tool, _ in queried | paged} <= {name for name, _ in calls}


@pytest.mark.slow
def test_the_demo_counters_through_the_shipped_rules(tmp_path: Path) -> None:
    """Guarded crew: nothing critical. Legacy crew: ToolSilentFailure for the wrong-collection repricing."""
    guarded = run_crew(tmp_path / "g", modes=["guarded"])
    assert guarded.registry is not None
    critical = [a for a in would_fire(samples_from_registry(guarded.registry)) if a.severity == c.SEVERITY_CRITICAL]
    assert critical == [], critical
    legacy = run_crew(tmp_path / "l", modes=["legacy"])
    assert legacy.registry is not None
    alerts = would_fire(samples_from_registry(legacy.registry))
    pages = {(a.name, a.tool) for a in alerts if a.severity == c.SEVERITY_CRITICAL}
    assert (c.ALERT_SILENT_FAILURE, "legacy_reprice_collection") in pages
    assert {a.tool for a in alerts if a.name == c.ALERT_SILENT_FAILURE} == {"legacy_reprice_collection"}
    with open_traces([legacy.traces_dir]) as f:
        assert {(r["tool_name"], r["outcome"]) for r in f.run("silent_failures")} == {
            ("legacy_reprice_collection", c.OUTCOME_POSTCONDITION_FAILED)}

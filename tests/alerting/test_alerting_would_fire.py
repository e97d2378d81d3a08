"""would_fire: a run's final counters, replayed through the shipped rules by the real promtool."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.samples import Sample

import telemetry
from telemetry import conventions as c
from telemetry.demo._alerting import (
    DEFAULT_MINUTES,
    FiringAlert,
    alert_names,
    replay_document,
    samples_from_registry,
    would_fire,
)
from telemetry.testing import capture

import shipped

CALLS = 20
"""Calls per tool in each scenario: a short run, like the crew demo's."""


# --- the tools of the scenarios: real instrumented functions -----------------------------------


from sample_tools import read_state, set_price, write_state  # noqa: E402


@telemetry.instrument_tool(kind="send")
def send_update(text: str) -> dict[str, Any]:
    return {"ok": False, "error": c.OUTCOME_STALE_POLICY}


_lossy: dict[str, str] = {}
_lossy_writes = [0]


@telemetry.instrument_tool(kind="write", readback=lambda call, result: _lossy.get(call.arguments["key"]) == call.arguments["value"])
def update_record(key: str, value: str) -> dict[str, Any]:
    """A write that lands on every other call only: half its read-backs mismatch."""
    _lossy_writes[0] += 1
    if _lossy_writes[0] % 2:
        _lossy[key] = value
    return {"ok": True}


def good_traffic() -> None:
    for n in range(CALLS):
        read_state("plan")
        write_state("plan", f"v{n}")


def fired(alerts: list[FiringAlert]) -> set[tuple[str, str | None]]:
    return {(alert.name, alert.tool) for alert in alerts}


# --- the scenarios ---------------------------------------------------------------------------


def test_only_good_outcomes_fire_nothing(promtool: str) -> None:
    """A run of good reads and verified writes fires no alert at all."""
    with capture() as cap:
        good_traffic()
    assert cap.calls("write_state", readback=c.READBACK_MATCH, outcome=c.OUTCOME_OK) == CALLS
    assert would_fire(samples_from_registry(cap.registry), promtool=promtool) == []


def test_bad_outcome_behind_a_200_pages_for_that_tool_only(promtool: str) -> None:
    """A tool that says done while its outcome check says postcondition_failed pages for it, nothing for the good tools."""
    with capture() as cap:
        good_traffic()
        for _n in range(CALLS):
            set_price("sku-1", 9.99)
    alerts = would_fire(samples_from_registry(cap.registry), promtool=promtool)
    page = [a for a in alerts if a.name == c.ALERT_SILENT_FAILURE]
    assert [(a.tool, a.labels[c.LABEL_OUTCOME], a.severity) for a in page] == [
        ("set_price", c.OUTCOME_POSTCONDITION_FAILED, c.SEVERITY_CRITICAL)
    ]
    assert page[0].summary == "set_price told its caller success but the outcome was postcondition_failed"
    assert cap.sample(c.METRIC_SILENT_FAILURES_TOTAL, {c.LABEL_TOOL: "set_price", c.LABEL_OUTCOME: c.OUTCOME_POSTCONDITION_FAILED}) == CALLS
    assert "silent_failures" in page[0].annotations["forensics"]
    assert not [a for a in alerts if a.tool in ("read_state", "write_state")], alerts


def test_stale_sends_fire_tool_stale_sends(promtool: str) -> None:
    """A send tool refused as stale_policy fires ToolStaleSends (warning) for that tool."""
    with capture() as cap:
        good_traffic()
        for _n in range(CALLS):
            send_update("status")
    assert cap.sample(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "send_update"}) == CALLS
    alerts = would_fire(samples_from_registry(cap.registry), promtool=promtool)
    stale = [a for a in alerts if a.name == c.ALERT_STALE_SENDS]
    assert [(a.tool, a.severity) for a in stale] == [("send_update", c.SEVERITY_WARNING)]
    assert stale[0].summary == "send_update attempted sends against a superseded policy"
    assert (c.ALERT_SILENT_FAILURE, "send_update") not in fired(alerts), "a refusal is not a bad outcome"
    assert not [a for a in alerts if a.tool in ("read_state", "write_state")], alerts


def test_readback_mismatches_fire_tool_readback_mismatch(promtool: str) -> None:
    """Writes whose read-back disagrees fire ToolReadbackMismatch (and the silent-failure page) for that tool."""
    _lossy.clear()
    with capture() as cap:
        good_traffic()
        for n in range(CALLS):
            update_record("row-1", f"v{n}")
    mismatches = cap.calls("update_record", readback=c.READBACK_MISMATCH)
    assert 0 < mismatches < CALLS
    alerts = would_fire(samples_from_registry(cap.registry), promtool=promtool)
    assert (c.ALERT_READBACK_MISMATCH, "update_record") in fired(alerts)
    assert (c.ALERT_SILENT_FAILURE, "update_record") in fired(alerts)
    assert not [a for a in alerts if a.tool in ("read_state", "write_state")], alerts


# --- the replay shape ------------------------------------------------------------------------


def _calls(tool: str, outcome: str, value: float) -> Sample:
    labels = {c.LABEL_TOOL: tool, c.LABEL_TRANSPORT: c.TRANSPORT_OK, c.LABEL_READBACK: c.READBACK_SKIPPED, c.LABEL_OUTCOME: outcome}
    return Sample(c.METRIC_TOOL_CALLS_TOTAL, labels, value, None, None)


def _silent(tool: str, outcome: str, value: float) -> Sample:
    return Sample(c.METRIC_SILENT_FAILURES_TOTAL, {c.LABEL_TOOL: tool, c.LABEL_OUTCOME: outcome}, value, None, None)


def test_an_error_envelope_the_caller_was_told_about_does_not_page(promtool: str) -> None:
    """{"ok": False, "error": ...} is counted as a bad outcome but not as silent: no page, no budget burn."""
    @telemetry.instrument_tool(kind="write", name="told_write")
    def told_write() -> dict[str, Any]:
        return {"ok": False, "error": c.OUTCOME_POSTCONDITION_FAILED}

    with capture() as cap:
        good_traffic()
        for _n in range(CALLS):
            told_write()
    assert cap.calls("told_write", outcome=c.OUTCOME_POSTCONDITION_FAILED) == CALLS
    assert cap.sample(c.METRIC_SILENT_FAILURES_TOTAL, {c.LABEL_TOOL: "told_write", c.LABEL_OUTCOME: c.OUTCOME_POSTCONDITION_FAILED}) in (None, 0)
    alerts = would_fire(samples_from_registry(cap.registry), promtool=promtool)
    assert not [a for a in alerts if a.severity == c.SEVERITY_CRITICAL], alerts


def test_a_burst_stays_a_burst_and_the_window_decides_which_for_can_elapse(promtool: str) -> None:
    """A short window shows a waiver burst as a spike and keeps long-for burns pending; a long one shows a trickle."""
    run = [
        _calls("delegate_task", c.OUTCOME_OK, 12),
        Sample(c.METRIC_CONSTRAINT_WAIVERS_TOTAL, {c.LABEL_TOOL: "delegate_task"}, 12, None, None),
        _calls("charge", c.OUTCOME_OK, 50),
        _calls("charge", c.OUTCOME_TOOL_ERROR, 10),
        _silent("charge", c.OUTCOME_TOOL_ERROR, 10),
    ]
    short = fired(would_fire(run, promtool=promtool))
    assert (c.ALERT_CONSTRAINT_WAIVER_SPIKE, "delegate_task") in short
    assert (c.ALERT_INTENT_BUDGET_BURN_FAST, "charge") in short
    assert (c.ALERT_INTENT_BUDGET_BURN_MEDIUM, "charge") not in short  # for: 15m > the 15-minute window
    long = fired(would_fire(run, promtool=promtool, minutes=90))
    assert (c.ALERT_CONSTRAINT_WAIVER_SPIKE, "delegate_task") not in long
    assert {(c.ALERT_INTENT_BUDGET_BURN_MEDIUM, "charge"), (c.ALERT_INTENT_BUDGET_BURN_SLOW, "charge")} <= long


def test_replay_document_shape() -> None:
    """Each series is 0 for the quiet hour, then rises steadily to its final value at the evaluation time; up is 1."""
    doc = replay_document([_calls("t", c.OUTCOME_OK, 30)], rules=shipped.rule_files()[0], alerts=list(c.ALERTS))
    test = doc["tests"][0]
    series = {s["series"]: s["values"] for s in test["input_series"]}
    calls = next(v for k, v in series.items() if k.startswith(c.METRIC_TOOL_CALLS_TOTAL))
    quiet, *rise = calls.split(" ")
    assert quiet == "0x60" and len(rise) == DEFAULT_MINUTES and float(rise[-1]) == 30.0
    assert [float(v) for v in rise] == sorted(float(v) for v in rise)
    up = next(v for k, v in series.items() if k.startswith(c.PROMETHEUS_UP + "{"))
    assert up == f"1x{60 + DEFAULT_MINUTES}"
    assert {case["eval_time"] for case in test["alert_rule_test"]} == {f"{60 + DEFAULT_MINUTES}m"}
    assert [case["alertname"] for case in test["alert_rule_test"]] == list(c.ALERTS)


# --- parsing promtool's real output ----------------------------------------------------------


def test_awkward_label_values_survive_promtool_quoting(promtool: str) -> None:
    """Quotes, backslashes, commas, braces, newlines and non-ASCII in a label come back exactly as sent."""
    tool = 'we"ird\\tool, {x="1"}\nnæste ✓'
    alerts = would_fire([_calls(tool, c.OUTCOME_NOT_FOUND, 5), _silent(tool, c.OUTCOME_NOT_FOUND, 5)], promtool=promtool)
    page = [a for a in alerts if a.name == c.ALERT_SILENT_FAILURE]
    assert [a.tool for a in page] == [tool]
    assert page[0].summary == f"{tool} told its caller success but the outcome was not_found"


def test_promtool_errors_are_reported_not_read_as_no_alerts(promtool: str, tmp_path: Path) -> None:
    """A rule file promtool cannot load raises ConfigurationError carrying promtool's message."""
    rules = yaml.safe_load(shipped.rule_files()[0].read_text())
    rules["groups"][1]["rules"][0]["expr"] = "sum by (tool) (rate(tool_calls_total[5m]) >"
    broken = tmp_path / "broken.rules.yml"
    broken.write_text(yaml.safe_dump(rules))
    with pytest.raises(telemetry.ConfigurationError, match="parse error"):
        would_fire([_calls("t", c.OUTCOME_OK, 5)], rules=broken, promtool=promtool)


def test_missing_promtool_says_to_install_debians_prometheus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without promtool on PATH (or at the given path) the error names Debian's prometheus package."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(telemetry.ConfigurationError, match="Debian's 'prometheus' package"):
        would_fire([_calls("t", c.OUTCOME_OK, 5)])
    with pytest.raises(telemetry.ConfigurationError, match="no-such-promtool"):
        would_fire([_calls("t", c.OUTCOME_OK, 5)], promtool=tmp_path / "no-such-promtool")


# --- inputs ----------------------------------------------------------------------------------


def test_alert_names_of_the_shipped_rules_are_the_conventions_alerts() -> None:
    """The alert: lines read without a YAML parser name exactly the shipped alerts, in order."""
    names = alert_names(shipped.rule_files()[0])
    assert names == list(dict.fromkeys(rule["alert"] for rule in shipped.alert_rules()))
    assert [n for n in names if n not in c.WATCH_ALERTS] == list(c.ALERTS)


def test_samples_from_registry_keeps_only_our_series() -> None:
    """Counters and histogram series are kept; _created timestamps and other metrics are not."""
    with capture() as cap:
        read_state("x")
        Counter("unrelated_things", "Another library's counter.", registry=cap.registry).inc()
    names = {s.name for s in samples_from_registry(cap.registry)}
    assert c.METRIC_TOOL_CALLS_TOTAL in names and c.METRIC_TOOL_CALL_DURATION + "_bucket" in names
    assert not [n for n in names if n.endswith("_created") or n.startswith("unrelated")]
    assert samples_from_registry(CollectorRegistry()) == []


@pytest.mark.parametrize("minutes", [1, 0, 1441, 2.5, True])
def test_bad_window_is_refused_with_its_value(minutes: Any) -> None:
    """A replay window outside 2..1440 whole minutes raises ConfigurationError naming it."""
    with pytest.raises(telemetry.ConfigurationError, match=f"minutes={minutes!r}"):
        would_fire([_calls("t", c.OUTCOME_OK, 5)], minutes=minutes)


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_impossible_counter_values_are_refused(value: float) -> None:
    """A negative or non-finite sample value raises ConfigurationError naming the series."""
    with pytest.raises(telemetry.ConfigurationError, match="tool_calls_total"):
        would_fire([_calls("t", c.OUTCOME_OK, value)])


def test_promtool_path_is_used_when_given(promtool: str) -> None:
    """An explicit promtool path works the same as the one on PATH."""
    assert os.path.isabs(promtool)
    alerts = would_fire([_calls("t", c.OUTCOME_TOOL_ERROR, 5), _silent("t", c.OUTCOME_TOOL_ERROR, 5)], promtool=Path(promtool))
    assert (c.ALERT_SILENT_FAILURE, "t") in fired(alerts)

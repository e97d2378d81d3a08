"""The shipped alerts fire from observe_tool_spans' counters, for agents traced by real peer instrumentations.

Each case runs ``peer_agent.py`` (an agent under pydantic-ai's own instrumentation, OpenInference's
LangChain instrumentor or traceloop's ``@tool``) in a child process, reads the ``/metrics`` text of
the processor's registry (what Prometheus would scrape), and replays those samples through the
shipped rules with the real promtool (``telemetry.demo._alerting.would_fire``). The story's
charge returns ``{"success": false, "error": "quota_exceeded"}`` and its refund an error status,
on spans the tracer marks OK or unset: ``ToolMaskedFailures`` and ``ToolReportedFailuresHigh``
fire for both tools, nothing for the lookup that succeeds, and never a silent failure (read-back
is unknown).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from telemetry import conventions as c
from telemetry.demo._alerting import FiringAlert, SampleLike, would_fire

from optional import in_ci

AGENT = Path(__file__).with_name("peer_agent.py")
RUNS = 20
"""Agent runs per case: 20 failed charges and 40 failed refunds, enough for the reported-failures
alert's "at least 5 in 5 minutes" when the run is replayed over would_fire's 15 minutes."""
FAILING = {"charge_card": "quota_exceeded", "refund_payment": "refund_window_closed"}
GOOD = "lookup_order"
EXTRA = {
    "openinference-langchain": "openinference-instrumentation-langchain",
    "traceloop": "traceloop-sdk",
}
OUR_NAMES = frozenset(c.METRIC_LABELS) | {
    name + suffix for name in c.METRIC_LABELS if not name.endswith("_total") for suffix in c.HISTOGRAM_SUFFIXES
}


def scraped(fmt: str, tmp_path: Path) -> list[SampleLike]:
    """Run the story under ``fmt`` and return the samples of the /metrics text it rendered."""
    out = tmp_path / "metrics.txt"
    done = subprocess.run([sys.executable, str(AGENT), fmt, str(RUNS), str(out)], capture_output=True, text=True, timeout=300)
    if done.returncode == 4:
        message = f"{done.stderr.strip()}: install {EXTRA.get(fmt, fmt)} to run this case"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    assert done.returncode == 0, done.stderr
    return [sample for family in text_string_to_metric_families(out.read_text(encoding="utf-8"))
            for sample in family.samples if sample.name in OUR_NAMES]


def value(samples: list[SampleLike], name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def fired(alerts: list[FiringAlert]) -> set[tuple[str, str | None]]:
    return {(alert.name, alert.tool) for alert in alerts}


@pytest.mark.parametrize("fmt", ["pydantic-ai", "openinference-langchain", "traceloop"])
def test_the_shipped_alerts_fire_from_the_live_processors_counters(promtool: str, tmp_path: Path, fmt: str) -> None:
    samples = scraped(fmt, tmp_path)
    for tool, outcome in FAILING.items():
        calls = RUNS * (2 if tool == "refund_payment" else 1)
        assert value(samples, c.METRIC_TOOL_CALLS_TOTAL, tool=tool, transport=c.TRANSPORT_OK,
                     readback=c.READBACK_UNKNOWN, outcome=outcome) == calls
        assert value(samples, c.METRIC_MASKED_FAILURES_TOTAL, tool=tool, outcome=outcome) == calls
    assert value(samples, c.METRIC_TOOL_CALLS_TOTAL, tool=GOOD, outcome=c.OUTCOME_OK) == RUNS
    assert value(samples, c.METRIC_SILENT_FAILURES_TOTAL) == 0
    assert value(samples, c.METRIC_INTERNAL_ERRORS_TOTAL) == 0

    alerts = would_fire(samples, promtool=promtool)
    expected = {(alert, tool) for alert in (c.ALERT_MASKED_FAILURES, c.ALERT_REPORTED_FAILURES_HIGH) for tool in FAILING}
    assert fired(alerts) == expected, alerts
    masked = {(a.tool, a.labels[c.LABEL_OUTCOME]) for a in alerts if a.name == c.ALERT_MASKED_FAILURES}
    assert masked == set(FAILING.items())
    assert all(a.severity == c.SEVERITY_WARNING for a in alerts)


def test_a_framework_span_around_our_decorated_tool_is_counted_once(promtool: str, tmp_path: Path) -> None:
    """pydantic-ai's own instrumentation and our pydantic-ai integration on the same tools, with the
    processor on the runtime's provider: each call counted once, by the decorator (its read-back
    known, its span status ERROR), so no masked failure fires, and the reported failures still do."""
    samples = scraped("pydantic-ai+ours", tmp_path)
    assert value(samples, c.METRIC_TOOL_CALLS_TOTAL, readback=c.READBACK_UNKNOWN) == 0
    assert value(samples, c.METRIC_TOOL_CALLS_TOTAL, tool="charge_card") == RUNS
    assert value(samples, c.METRIC_TOOL_CALLS_TOTAL, tool="refund_payment") == 2 * RUNS
    assert value(samples, c.METRIC_MASKED_FAILURES_TOTAL) == 0
    assert fired(would_fire(samples, promtool=promtool)) == {(c.ALERT_REPORTED_FAILURES_HIGH, tool) for tool in FAILING}

"""The toolkit's own failures reach /metrics: every contained failure counted by stage, not only the first."""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import telemetry
from telemetry import conventions as c
from telemetry.testing import capture

from .kinds import KINDS, drive, make


def _missing_argument(call: Any, result: Any) -> bool:
    return bool(call.arguments["missing"])  # the typo a read-back is likely to contain


def _stage(cap: Any, stage: str) -> float:
    return cap.sample(c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: stage}) or 0.0


@pytest.mark.parametrize("kind", KINDS)
def test_every_raising_readback_is_counted(kind: str) -> None:
    """Five calls whose read-back raises: five readback errors counted, five calls labelled readback=error."""
    tool = telemetry.instrument_tool(readback=_missing_argument)(make(kind, lambda x, y: {"sum": x + y}))
    with capture() as cap:
        for _ in range(5):
            drive(kind, tool, 3)
        assert _stage(cap, c.STAGE_READBACK) == 5
        assert cap.calls("tool", readback=c.READBACK_ERROR) == 5
        assert all(_stage(cap, stage) == 0 for stage in c.STAGES if stage != c.STAGE_READBACK)


def test_each_stage_counts_its_own_failures() -> None:
    """A raising outcome classifier is a classifier error; an unprintable outcome an outcome error."""

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    def bad_classifier(call: Any, result: Any) -> str:
        raise ValueError("classifier bug")

    classified = telemetry.instrument_tool(name="classified", outcome=bad_classifier)(lambda: {"ok": True})
    unprintable = telemetry.instrument_tool(name="unprintable", outcome=lambda call, result: Unprintable())(lambda: None)
    with capture() as cap:
        classified()
        classified()
        unprintable()
        assert _stage(cap, c.STAGE_CLASSIFIER) == 2
        assert _stage(cap, c.STAGE_OUTCOME) == 1


class Raising(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise OSError("collector gone")


@pytest.mark.parametrize("kind", KINDS)
def test_a_failing_exporter_never_raises_into_the_tool_and_shows_on_metrics(kind: str, tmp_path: Path) -> None:
    """An exporter that raises: the tool's result is untouched; /metrics shows the exporter errors and the drops."""
    tool = telemetry.instrument_tool(make(kind, lambda x, y: {"sum": x + y}))
    expected = drive(kind, make(kind, lambda x, y: {"sum": x + y}), 3)
    with telemetry.configure(traces_dir=tmp_path, extra_exporters=[Raising()], metrics_port=0) as rt:
        for _ in range(3):
            assert drive(kind, tool, 3) == expected
        rt.force_flush()
        assert rt.metrics_url is not None
        with urllib.request.urlopen(rt.metrics_url, timeout=10) as response:
            text = response.read().decode()
    assert f'{c.METRIC_INTERNAL_ERRORS_TOTAL}{{stage="exporter"}} 0.0' not in text
    assert f'{c.METRIC_SPANS_DROPPED_TOTAL}{{exporter="other",reason="export_failed"}} 3.0' in text
    assert rt.dropped_spans[c.EXPORTER_FILE] == dict.fromkeys(c.DROP_REASONS, 0)
    assert rt.internal_errors[c.STAGE_EXPORTER] >= 1


def test_health_series_exist_at_zero_from_the_start(tmp_path: Path) -> None:
    """Every stage and every (exporter, reason) series is exposed at 0 before anything fails, so rate() sees the first."""
    with telemetry.configure(traces_dir=tmp_path) as rt:
        text = rt.metrics_text(openmetrics=False)
    for stage in c.STAGES:
        assert f'{c.METRIC_INTERNAL_ERRORS_TOTAL}{{stage="{stage}"}} 0.0' in text
    for exporter in c.EXPORTERS:
        for reason in c.DROP_REASONS:
            assert f'{c.METRIC_SPANS_DROPPED_TOTAL}{{exporter="{exporter}",reason="{reason}"}} 0.0' in text

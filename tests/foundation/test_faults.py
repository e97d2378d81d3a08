"""Fault injection: when telemetry breaks, the tool still returns its own result or exception."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import telemetry
from telemetry import conventions as c
from telemetry.runtime import _containment as _safe
from telemetry.testing import Capture, capture

from .kinds import KINDS, drive, make


class Boom(Exception):
    pass


def _expected(kind: str) -> Any:
    bare = make(kind, lambda x, y: {"sum": x + y})
    return drive(kind, bare, 3)


def _raise(*_: Any) -> Any:
    raise RuntimeError("telemetry callback failure")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("callback", ["readback", "outcome"])
def test_raising_callbacks_leave_the_result_alone(kind: str, callback: str, caplog: pytest.LogCaptureFixture) -> None:
    """A raising readback or outcome classifier is logged once, then counted; the tool's value comes back."""
    name = f"faulty_{uuid.uuid4().hex[:8]}"  # a place no earlier test has logged
    tool = telemetry.instrument_tool(name=name, **{callback: _raise})(make(kind, lambda x, y: {"sum": x + y}))
    place = f"the read-back of {name}" if callback == "readback" else f"the outcome classifier of {name}"
    stage = c.STAGE_READBACK if callback == "readback" else c.STAGE_CLASSIFIER
    with capture() as cap, caplog.at_level(logging.WARNING, logger="telemetry"):
        assert drive(kind, tool, 3) == _expected(kind)
        assert drive(kind, tool, 3) == _expected(kind)
        attrs = cap.spans(name)[0].attributes
    if callback == "readback":
        assert attrs[c.TOOL_READBACK] == "error"
    else:
        assert attrs[c.TOOL_OUTCOME] == "ok"
    logged = [r for r in caplog.records if name in r.getMessage()]
    assert [r.getMessage() for r in logged] == [
        f"outcome-telemetry: {place} failed and was ignored (the tool call is unaffected; further failures "
        f"here are counted in {c.METRIC_INTERNAL_ERRORS_TOTAL}{{{c.LABEL_STAGE}={stage!r}}}, not logged): "
        f"RuntimeError('telemetry callback failure')"
    ]
    assert logged[0].levelno == logging.WARNING and logged[0].exc_info is not None
    assert _safe.failures[place] == 2  # the second failure was counted, not logged
    assert cap.sample(c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: stage}) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_raising_callbacks_do_not_replace_the_tools_exception(kind: str) -> None:
    """When the tool raises, its own exception reaches the caller even if callbacks would fail."""
    tool = telemetry.instrument_tool(readback=_raise, outcome=_raise)(make(kind, lambda x, y: (_ for _ in ()).throw(Boom())))
    with capture():
        with pytest.raises(Boom):
            drive(kind, tool, 3)


class ExplodingProcessor(SpanProcessor):
    """A span processor that raises on start and on end: in opentelemetry-python such a processor
    once replaced the application's own exception with its own; here it must change nothing."""

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        raise RuntimeError("on_start failed")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("on_end failed")


@pytest.fixture
def exploding() -> Iterator[Capture]:
    with capture() as cap:
        cap.runtime.provider.add_span_processor(ExplodingProcessor())
        yield cap


@pytest.mark.parametrize("kind", KINDS)
def test_raising_span_processor(kind: str, exploding: Capture) -> None:
    """A span processor that raises changes neither the value nor the exception; counting goes on."""
    ok_tool = telemetry.instrument_tool(name="ok_tool")(make(kind, lambda x, y: {"sum": x + y}))
    bad_tool = telemetry.instrument_tool(name="bad_tool")(make(kind, lambda x, y: (_ for _ in ()).throw(Boom())))
    assert drive(kind, ok_tool, 3) == _expected(kind)
    with pytest.raises(Boom):
        drive(kind, bad_tool, 3)
    assert exploding.calls("ok_tool", transport="ok") == 1
    assert exploding.calls("bad_tool", transport="error") == 1
    assert _safe.failures["starting a tool span"] >= 2


class FailingExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        raise OSError("disk full")

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("kind", KINDS)
def test_traces_dir_lost_after_configure_and_failing_exporter(kind: str, tmp_path: Path) -> None:
    """A traces folder that vanishes after configure() and an exporter that raises are counted, never raised."""
    folder = tmp_path / "traces"
    rt = telemetry.configure(service_name="faulty", traces_dir=folder, extra_exporters=[FailingExporter()])
    folder.rmdir()
    folder.write_text("a file where the traces folder was")
    try:
        tool = telemetry.instrument_tool(make(kind, lambda x, y: {"sum": x + y}))
        for _ in range(3):
            assert drive(kind, tool, 3) == _expected(kind)
        assert rt.registry.get_sample_value(
            c.METRIC_TOOL_CALLS_TOTAL, {"tool": "tool", "transport": "ok", "readback": "skipped", "outcome": "ok"}
        ) == 3
    finally:
        rt.shutdown()
    assert rt.file_exporter is not None and rt.file_exporter.dropped_spans == 3
    assert rt.trace_file is None
    assert rt.dropped_spans[c.EXPORTER_FILE][c.DROP_EXPORT_FAILED] == 3
    assert rt.dropped_spans[c.EXPORTER_OTHER][c.DROP_EXPORT_FAILED] == 3
    dropped = {c.LABEL_EXPORTER: c.EXPORTER_FILE, c.LABEL_REASON: c.DROP_EXPORT_FAILED}
    assert rt.registry.get_sample_value(c.METRIC_SPANS_DROPPED_TOTAL, dropped) == 3
    assert rt.internal_errors[c.STAGE_EXPORTER] >= 2  # the file's write and the raising exporter, at least once each

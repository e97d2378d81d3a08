"""No silent span loss: bursts, full queues, failing exporters and SIGKILL, each counted or measured."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

import telemetry
from telemetry import conventions as c
from telemetry.forensics import open_traces
from telemetry.runtime._batching import BatchSettings, CountingBatchProcessor
from telemetry.runtime._metrics import ToolMetrics

ROOT = Path(__file__).resolve().parents[2]
THREADS, PER_THREAD = 8, 2_500


def spans_in(directory: Path) -> int:
    total = 0
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            data = json.loads(line)
            total += sum(len(ss["spans"]) for rs in data["resourceSpans"] for ss in rs["scopeSpans"])
    return total


def burst(threads: int = THREADS, per_thread: int = PER_THREAD) -> None:
    @telemetry.instrument_tool(kind="read")
    def ping(i: int) -> dict[str, bool]:
        return {"ok": True}

    def work() -> None:
        for i in range(per_thread):
            ping(i)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


class Stalled(SpanExporter):
    """An exporter stuck on its first batch until released (a collector that hangs)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = threading.Event()
        self.received = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(30)
        self.received += len(spans)
        self.exported.set()
        return SpanExportResult.SUCCESS


def test_a_burst_that_overflows_the_sdk_queue_loses_no_span_with_defaults(tmp_path: Path) -> None:
    """8 threads x 2,500 calls, ten times the SDK's 2,048-span queue: every span reaches the file.

    A hung exporter next to it (an OTLP collector that stopped answering) fills its own queue;
    what it loses is counted exactly, and does not cost the file a span.
    """
    stalled = Stalled()
    with telemetry.configure(service_name="burst", traces_dir=tmp_path, extra_exporters=[stalled]) as rt:
        assert rt.batch_settings[c.EXPORTER_FILE].max_queue_size == 2048
        burst()
        stalled.release.set()
    calls = THREADS * PER_THREAD
    assert spans_in(tmp_path) == calls
    assert rt.dropped_spans[c.EXPORTER_FILE] == dict.fromkeys(c.DROP_REASONS, 0)
    other = rt.dropped_spans[c.EXPORTER_OTHER]
    assert other[c.DROP_QUEUE_FULL] > 0 and stalled.received + other[c.DROP_QUEUE_FULL] == calls
    dropped = {c.LABEL_EXPORTER: c.EXPORTER_OTHER, c.LABEL_REASON: c.DROP_QUEUE_FULL}
    assert rt.registry.get_sample_value(c.METRIC_SPANS_DROPPED_TOTAL, dropped) == other[c.DROP_QUEUE_FULL]
    assert f'{c.METRIC_SPANS_DROPPED_TOTAL}{{exporter="other",reason="queue_full"}}' in rt.metrics_text(openmetrics=False)


def test_without_back_pressure_every_dropped_span_is_counted(tmp_path: Path) -> None:
    """block_millis=0 and a small queue: spans in the file plus spans counted as dropped is every call."""
    with telemetry.configure(
        service_name="drop", traces_dir=tmp_path, block_millis=0, max_queue_size=64, max_export_batch_size=64
    ) as rt:
        burst(threads=4, per_thread=1_000)
    dropped = rt.dropped_spans[c.EXPORTER_FILE]
    assert spans_in(tmp_path) + dropped[c.DROP_QUEUE_FULL] == 4_000
    assert dropped[c.DROP_EXPORT_FAILED] == dropped[c.DROP_SHUTDOWN_TIMEOUT] == 0


def test_a_shutdown_that_times_out_counts_what_was_still_queued_and_in_flight() -> None:
    """Spans still queued behind a hung exporter when shutdown() gives up are counted as
    shutdown_timeout, and so is the batch the exporter holds (in a process that exits next, its
    thread dies with it). Should the exporter finish that batch later, nothing is counted twice."""
    stalled = Stalled()
    metrics = ToolMetrics(CollectorRegistry())
    settings = BatchSettings(max_queue_size=2048, schedule_delay_millis=10, max_export_batch_size=100, export_timeout_millis=100)
    processor = CountingBatchProcessor(stalled, settings, metrics, exporter_label=c.EXPORTER_OTLP)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for _ in range(600):
        tracer.start_span("s").end()
    started = time.monotonic()
    processor.shutdown()  # waits export_timeout_millis for the hung batch, then gives up on it and the rest
    assert time.monotonic() - started < 5
    assert processor.dropped[c.DROP_SHUTDOWN_TIMEOUT] == 600
    stalled.release.set()
    assert stalled.exported.wait(30)  # the batch given up on reaches the exporter late
    assert 0 < stalled.received <= 100
    time.sleep(0.05)
    assert processor.dropped == {c.DROP_SHUTDOWN_TIMEOUT: 600}
    labels = {c.LABEL_EXPORTER: c.EXPORTER_OTLP, c.LABEL_REASON: c.DROP_SHUTDOWN_TIMEOUT}
    assert metrics.registry.get_sample_value(c.METRIC_SPANS_DROPPED_TOTAL, labels) == 600


def test_sigkill_loss_is_bounded_and_forensics_reads_what_is_left(tmp_path: Path) -> None:
    """A process killed at 2,000 calls/s leaves a file forensics loads; the loss is measured and bounded.

    The bound is structural, not a timing: with back-pressure the queue never holds more than
    its 2,048 spans, plus one batch of 512 being written and one call per thread.
    """
    traces = tmp_path / "traces"
    out = tmp_path / "kill.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_kill.py"), "--rate", "2000", "--seconds", "1.5",
         "--threads", "4", "--runs", "1", "--keep", str(traces), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    measured = json.loads(out.read_text())["2000/s"]["runs"][0]
    print(f"SIGKILL at {measured['calls_per_second']} calls/s: {measured['spans_lost']} of "
          f"{measured['calls_returned']} spans lost ({measured['lost_ms_of_calls']} ms of calls)")
    assert measured["calls_returned"] > 0 and measured["spans_in_file"] > 0
    assert measured["spans_lost"] <= 2048 + 512 + 4
    with open_traces([traces], skip_bad_lines=False) as forensics:
        loaded = len(forensics.spans().fetchall())
    assert loaded == measured["spans_in_file"]

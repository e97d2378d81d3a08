"""observe_tool_spans holds a tool span's counts until the metrics are collected: every reader sees them all.

The processor adds each span's counts to its kind of call under one lock and hands them to the
prometheus-client values before any collection (``ToolMetrics.before_collect``). What a user relies
on: a scrape, ``generate_latest``, ``get_sample_value`` and a registry restricted to some names all
see every span ended before them, exactly, from any number of threads; a runtime replaced by another
keeps the counts made while it was active; the provider's shutdown and ``force_flush`` hand them
over; a failure while handing them over is contained and counted.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import weakref
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from prometheus_client import CollectorRegistry, generate_latest

from telemetry import conventions as c
from telemetry.runtime import observe_tool_spans
from telemetry.testing import capture

from .test_observe import QUOTA, Peer, peer_attributes

CALL = {c.LABEL_TOOL: "charge", c.LABEL_TRANSPORT: c.TRANSPORT_OK, c.LABEL_READBACK: c.READBACK_UNKNOWN,
        c.LABEL_OUTCOME: "quota_exceeded"}
GOOD = {**CALL, c.LABEL_OUTCOME: c.OUTCOME_OK}


def _value(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_many_threads_ending_spans_lose_no_count() -> None:
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    registry = observer.metrics.registry
    found = Peer(observer)
    threads, each = 8, 400
    start = threading.Barrier(threads)
    seen: list[float] = []

    def work(n: int) -> None:
        start.wait()
        for i in range(each):
            found.call(c.FORMAT_GENAI, "charge", QUOTA if (i + n) % 2 else {"ok": True})
            if n == 0 and i % 50 == 0:  # collections while the others count
                seen.append(_value(registry, c.METRIC_TOOL_CALLS_TOTAL, CALL))

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    total = threads * each
    assert _value(registry, c.METRIC_TOOL_CALLS_TOTAL, CALL) == total // 2
    assert _value(registry, c.METRIC_TOOL_CALLS_TOTAL, GOOD) == total // 2
    assert _value(registry, c.METRIC_MASKED_FAILURES_TOTAL, {c.LABEL_TOOL: "charge", c.LABEL_OUTCOME: "quota_exceeded"}) == total // 2
    assert _value(registry, c.METRIC_TOOL_CALL_DURATION + "_count", {c.LABEL_TOOL: "charge"}) == total
    assert seen == sorted(seen)  # each collection saw at least what the one before it saw
    found.provider.shutdown()


def test_every_reader_sees_the_counts_held_so_far() -> None:
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    registry = observer.metrics.registry
    found = Peer(observer)
    for _ in range(3):
        found.call(c.FORMAT_GENAI, "charge")
    text = generate_latest(registry).decode()
    assert 'tool_calls_total{outcome="quota_exceeded",readback="unknown",tool="charge",transport="ok"} 3.0' in text
    found.call(c.FORMAT_GENAI, "charge")
    restricted = registry.restricted_registry([c.METRIC_MASKED_FAILURES_TOTAL])
    masked = [s.value for m in restricted.collect() for s in m.samples
              if s.name == c.METRIC_MASKED_FAILURES_TOTAL and s.labels.get(c.LABEL_TOOL) == "charge"]
    assert masked == [4.0]
    found.call(c.FORMAT_GENAI, "charge")
    assert _value(registry, c.METRIC_TOOL_CALLS_TOTAL, CALL) == 5
    found.provider.shutdown()


def test_the_failed_calls_exemplar_is_the_last_trace_at_its_spans_end() -> None:
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    provider = TracerProvider()
    provider.add_span_processor(observer)
    tracer = provider.get_tracer("a-peer")
    name, attrs = peer_attributes(c.FORMAT_GENAI, "charge", '{"success": false, "error": "quota_exceeded"}')
    ends = []
    for n in range(3):
        span = tracer.start_span(name, attributes=attrs, start_time=10**18 + n)
        span.end(end_time=10**18 + 10**9 * (n + 1))
        ends.append((format(span.get_span_context().trace_id, "032x"), (10**18 + 10**9 * (n + 1)) / 1e9))
    calls = observer.metrics.calls.labels("charge", c.TRANSPORT_OK, c.READBACK_UNKNOWN, "quota_exceeded")
    observer.metrics.registry.get_sample_value(c.METRIC_TOOL_CALLS_TOTAL, CALL)  # a collection hands them over
    kept = calls._value.get_exemplar()
    assert (kept.labels[c.EXEMPLAR_TRACE_ID], kept.timestamp) == ends[-1]
    provider.shutdown()


def test_a_replaced_runtime_keeps_the_counts_made_while_it_was_active() -> None:
    observer = observe_tool_spans()
    found = Peer(observer)
    with capture() as first:
        for _ in range(2):
            found.call(c.FORMAT_GENAI, "charge")
        with capture() as second:  # another runtime active now: the first one's counts are handed over
            found.call(c.FORMAT_GENAI, "charge")
            assert second.calls("charge", transport=c.TRANSPORT_OK, readback=c.READBACK_UNKNOWN,
                                outcome=c.OUTCOME_OTHER) == 1
        assert first.calls("charge", transport=c.TRANSPORT_OK, readback=c.READBACK_UNKNOWN, outcome=c.OUTCOME_OTHER) == 2
        found.call(c.FORMAT_GENAI, "charge")
        assert first.calls("charge", transport=c.TRANSPORT_OK, readback=c.READBACK_UNKNOWN, outcome=c.OUTCOME_OTHER) == 3
    found.provider.shutdown()


def test_force_flush_and_shutdown_hand_the_counts_over() -> None:
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    found = Peer(observer)
    found.call(c.FORMAT_GENAI, "charge")
    calls = observer.metrics.calls.labels("charge", c.TRANSPORT_OK, c.READBACK_UNKNOWN, "quota_exceeded")
    assert calls._value.get() == 0  # held: nothing has collected or flushed yet
    assert found.provider.force_flush()
    assert calls._value.get() == 1  # handed to the value itself, before any collection
    found.call(c.FORMAT_GENAI, "charge")
    found.provider.shutdown()
    assert calls._value.get() == 2


def test_a_failure_handing_the_counts_over_is_contained_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    found = Peer(observer)
    found.call(c.FORMAT_GENAI, "charge")

    def broken(*args: Any) -> None:
        raise RuntimeError("a value that refuses")

    monkeypatch.setattr(type(observer), "_hand_over", staticmethod(broken))
    registry = observer.metrics.registry
    assert _value(registry, c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: c.STAGE_METRICS}) == 1
    assert generate_latest(registry)  # the collection itself goes on
    found.provider.shutdown()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_count_is_held_counts_its_own_spans() -> None:
    """A fork while another thread is inside the processor's lock (held here by the test, as that
    thread would): the child counts its own tool spans and collects them instead of waiting forever."""
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    found = Peer(observer)
    found.call(c.FORMAT_GENAI, "charge")
    observer._held_lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only when its span is counted
            code = 1
            try:
                found.call(c.FORMAT_GENAI, "charge")
                code = 0 if _value(observer.metrics.registry, c.METRIC_TOOL_CALLS_TOTAL, CALL) == 2 else 3
            finally:
                os._exit(code)
    finally:
        observer._held_lock.release()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the processor's lock")
    assert os.waitstatus_to_exitcode(status) == 0
    assert _value(observer.metrics.registry, c.METRIC_TOOL_CALLS_TOTAL, CALL) == 1  # the parent's own count
    found.provider.shutdown()


def test_a_span_object_with_only_the_public_properties_is_counted_the_same() -> None:
    """Another SDK's span (or a wrapper) without the OpenTelemetry SDK's private fields: the
    processor reads its public properties instead, and counts it as it counts the SDK's own."""
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    provider = TracerProvider()
    kept: list[Any] = []

    class Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            kept.append(span)

    provider.add_span_processor(Keep())
    name, attrs = peer_attributes(c.FORMAT_GENAI, "charge", '{"success": false, "error": "quota_exceeded"}')
    provider.get_tracer("a-peer").start_span(name, attributes=attrs, start_time=10**18).end(end_time=10**18 + 10**7)
    sdk = kept[0]

    class Public:
        """Only what ReadableSpan's public API offers."""

        name, attributes, status, events = sdk.name, dict(sdk.attributes), sdk.status, sdk.events
        context, parent, start_time, end_time = sdk.context, sdk.parent, sdk.start_time, sdk.end_time

    observer.on_end(Public())  # type: ignore[arg-type]
    observer.on_end(sdk)
    registry = observer.metrics.registry
    assert _value(registry, c.METRIC_TOOL_CALLS_TOTAL, CALL) == 2
    assert _value(registry, c.METRIC_TOOL_CALL_DURATION + "_sum", {c.LABEL_TOOL: "charge"}) == pytest.approx(0.02)
    assert _value(registry, c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: c.STAGE_SPAN}) == 0
    provider.shutdown()


def test_a_shut_down_processor_is_no_longer_held_by_the_metrics_it_counted_in() -> None:
    """A runtime's metrics call the processor before each collection only while it counts there:
    after it moved to another runtime's metrics, and after its provider shut down, nothing of it
    is kept alive by them (an application that replaces its provider does not leak processors)."""
    found = Peer(observe_tool_spans())
    with capture() as first:
        found.call(c.FORMAT_GENAI, "charge")
        with capture() as second:
            found.call(c.FORMAT_GENAI, "charge")
            alive = weakref.ref(found.observer)
            assert first.calls("charge", transport=c.TRANSPORT_OK, readback=c.READBACK_UNKNOWN,
                               outcome=c.OUTCOME_OTHER) == 1
            found.provider.shutdown()
            assert second.calls("charge", transport=c.TRANSPORT_OK, readback=c.READBACK_UNKNOWN,
                                outcome=c.OUTCOME_OTHER) == 1
            del found
            gc.collect()
            assert alive() is None

"""Assert on your own tools' telemetry: an in-memory span exporter and a fresh registry.

Use :func:`capture` as a context manager anywhere, or the ``telemetry_capture`` pytest fixture
(registered automatically when outcome-telemetry is installed, by the ``pytest_outcome_telemetry``
plugin, which imports this module only when a test uses the fixture)::

    from telemetry import conventions as c

    def test_stale_write_is_refused(telemetry_capture):
        write_state("plan", "v2", expected_version="stale")
        span = telemetry_capture.span("write_state")
        assert span.attributes[c.TOOL_OUTCOME] == c.OUTCOME_REJECTED_STALE_VERSION
        assert telemetry_capture.calls("write_state", outcome=c.OUTCOME_REJECTED_STALE_VERSION) == 1

While a capture is open it replaces the process's runtime (if any) and restores it afterwards,
so captures never leak spans or counts into each other or into production telemetry.

Not thread-safe: a capture swaps one process-wide setting. Open one capture at a time, from one
thread (tools the block calls may run in other threads; two captures opened concurrently, as in
parallel tests within one process, would restore each other's runtime in the wrong order).
Parallel test runners that use processes (pytest-xdist) are fine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from . import conventions as c
from .runtime import Runtime
from .runtime import _active as _state

__all__ = ["Capture", "capture"]


class Capture:
    """What a capture recorded: finished spans and the metric registry."""

    def __init__(self, runtime: Runtime, exporter: InMemorySpanExporter) -> None:
        self.runtime = runtime
        self.exporter = exporter
        self.registry: CollectorRegistry = runtime.registry

    def spans(self, tool: str | None = None) -> list[ReadableSpan]:
        """Finished spans, oldest first; only ``tool``'s tool spans when a name is given."""
        found = list(self.exporter.get_finished_spans())
        if tool is None:
            return found
        return [s for s in found if (s.attributes or {}).get(c.GEN_AI_TOOL_NAME) == tool]

    def span(self, tool: str) -> ReadableSpan:
        """The one span of ``tool``; raises ``AssertionError`` when there is not exactly one.

        Raised explicitly, not with ``assert``, so it holds under ``python -O`` too.
        """
        found = self.spans(tool)
        if len(found) != 1:
            raise AssertionError(f"expected exactly one span of {tool!r}, found {len(found)}")
        return found[0]

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """``registry.get_sample_value(name, labels)``: None when the series does not exist."""
        return self.registry.get_sample_value(name, labels or {})

    def calls(self, tool: str, **labels: str) -> float:
        """How many calls of ``tool`` were counted with the given triad labels (any when omitted)."""
        total = 0.0
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name != c.METRIC_TOOL_CALLS_TOTAL or sample.labels.get(c.LABEL_TOOL) != tool:
                    continue
                if all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def clear(self) -> None:
        """Forget the spans recorded so far (counters keep counting)."""
        self.exporter.clear()


@contextmanager
def capture(service_name: str = "test") -> Iterator[Capture]:
    """Record decorated calls made inside the block in memory, synchronously (no batching).

    Not thread-safe (see the module docstring): one capture at a time per process.
    """
    provider = TracerProvider(resource=Resource.create({c.SERVICE_NAME: service_name}))
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    runtime = Runtime(
        provider=provider,
        owns_provider=True,
        processors=[processor],
        registry=CollectorRegistry(),
        file_exporter=None,
    )
    previous = _state.active
    _state.active = runtime
    try:
        yield Capture(runtime, exporter)
    finally:
        runtime.shutdown()
        _state.active = previous



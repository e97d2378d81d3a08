"""Decorator cost: @instrument_tool with the default file exporter against hand-written code.

Two views, both measured in one process in alternating rounds (machine noise hits every side;
the figures are medians over rounds). Each round's time includes flushing its spans, so the
cost of encoding and writing them counts, wherever the batch thread did the work.

- both exporting: the hand-written span (same attributes, the same counter with its trace_id
  exemplar and the same histogram) goes through the runtime's own provider, so it is written to
  the same trace file as the decorated call's.
- ours exporting, the hand-written discarding: the hand-written span goes to a provider whose
  batch processor hands spans to an exporter that drops them: what a user who writes spans by
  hand and exports nothing pays. The gap between the views is the file exporter's cost.

Each side is timed on two clocks: wall time, and the process's CPU time (all its threads, so
the batch thread's encoding counts). On an idle machine they agree, since the GIL serialises the
threads anyway; on a shared machine wall time also carries whatever else ran, so CPU time is the
steadier measure of what the toolkit itself costs.

Also measured: a decorated call when configure() was never called, against the bare function.

    python benchmarks/bench_decorator.py [--calls 20000] [--rounds 21]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

import telemetry
from telemetry import conventions as c
from telemetry.runtime._metrics import ToolMetrics


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def bare_tool(key: str, value: str) -> dict[str, Any]:
    return {"ok": True, "key": key}


def per_call_us(fn: Callable[..., Any], calls: int, flush: Callable[[], object] = lambda: None) -> float:
    return timed(fn, calls, flush)[0]


def timed(fn: Callable[..., Any], calls: int, flush: Callable[[], object] = lambda: None) -> tuple[float, float]:
    """(wall, CPU) microseconds per call, the flush of the round's spans included."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn("plan", "v2")
    flush()
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def hand_written_tool(tracer: Any, metrics: ToolMetrics, static: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """What a user would write instead: a span with the same attributes, the counter, the histogram."""

    def hand_written(key: str, value: str) -> dict[str, Any]:
        agent = telemetry.current_agent()
        attributes = dict(static)
        if agent is not None:
            attributes[c.GEN_AI_AGENT_ID] = agent.agent_id
        with tracer.start_as_current_span("execute_tool bench_tool", attributes=attributes) as span:
            started = time.perf_counter()
            result = bare_tool(key, value)
            span.set_attributes({c.TOOL_TRANSPORT: "ok", c.TOOL_READBACK: "skipped", c.TOOL_OUTCOME: "ok"})
            trace_id = format(span.get_span_context().trace_id, "032x")
            metrics.child(metrics.calls, "bench_tool", "ok", "skipped", "ok").inc(1, {c.EXEMPLAR_TRACE_ID: trace_id})
            metrics.child(metrics.duration, "bench_tool").observe(time.perf_counter() - started)
            return result

    return hand_written


def measure(calls: int, rounds: int) -> dict[str, float]:
    decorated = telemetry.instrument_tool(name="bench_tool", kind="write")(bare_tool)
    # Unconfigured first: no runtime exists yet.
    unconfigured = [per_call_us(decorated, calls) for _ in range(rounds)]
    bare = [per_call_us(bare_tool, calls) for _ in range(rounds)]

    static = dict(decorated.__outcome_telemetry__.static_attributes)  # type: ignore[attr-defined]
    discarding = TracerProvider()
    discarding.add_span_processor(BatchSpanProcessor(Discard()))
    with tempfile.TemporaryDirectory() as traces:
        rt = telemetry.configure(service_name="bench", traces_dir=traces, install_global=False)
        sides: dict[str, tuple[Callable[..., Any], Callable[[], object]]] = {
            "decorated": (decorated, rt.force_flush),
            "hand_file": (hand_written_tool(rt.tracer, rt.metrics, static), rt.force_flush),
            "hand_discard": (
                hand_written_tool(discarding.get_tracer("bench"), ToolMetrics(CollectorRegistry()), static),
                discarding.force_flush,
            ),
        }
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        with telemetry.agent("bench-agent"):
            for fn, flush in sides.values():  # warm every path
                per_call_us(fn, calls // 4, flush)
            for _ in range(rounds):
                for name, (fn, flush) in sides.items():
                    timings[name].append(timed(fn, calls, flush))
        dropped = sum(sum(r.values()) for r in rt.dropped_spans.values())
        rt.shutdown()
    discarding.shutdown()
    u, b = statistics.median(unconfigured), statistics.median(bare)
    result: dict[str, float] = {}
    for clock, index in (("wall", 0), ("cpu", 1)):
        d, hf, hd = (statistics.median(t[index] for t in timings[k]) for k in ("decorated", "hand_file", "hand_discard"))
        result |= {
            f"{clock}_decorated_us": round(d, 2),
            f"{clock}_hand_written_file_us": round(hf, 2),
            f"{clock}_hand_written_discard_us": round(hd, 2),
            f"{clock}_ratio_both_exporting": round(d / hf, 3),
            f"{clock}_ratio_to_discarding": round(d / hd, 3),
        }
    return result | {
        "spans_dropped": dropped,
        "unconfigured_us": round(u, 3),
        "bare_us": round(b, 3),
        "unconfigured_overhead_us": round(u - b, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=21, help="alternating rounds (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("bench-output/decorator.json"))
    ns = parser.parse_args(argv)
    result = measure(ns.calls, ns.rounds)
    print("decorator cost (medians, microseconds per call, flush included)      wall      CPU")
    rows = (
        ("@instrument_tool, default file exporter", "decorated_us"),
        ("hand-written, to the same file", "hand_written_file_us"),
        ("hand-written, to a discarding exporter", "hand_written_discard_us"),
        ("ratio, both exporting (target <= 1.10)", "ratio_both_exporting"),
        ("ratio, hand-written discarding (target <= 1.25)", "ratio_to_discarding"),
    )
    for label, key in rows:
        print(f"  {label:<58}: {result['wall_' + key]:8.3f} {result['cpu_' + key]:8.3f}")
    print(f"  {'spans dropped':<58}: {result['spans_dropped']:8.0f}")
    print(f"  {'bare function':<58}: {result['bare_us']:8.3f}")
    print(f"  {'decorated, never configured':<58}: {result['unconfigured_us']:8.3f}")
    print(f"  {'overhead unconfigured (<= 2.0)':<58}: {result['unconfigured_overhead_us']:8.3f}")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

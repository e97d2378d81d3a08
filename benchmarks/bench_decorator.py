"""Decorator overhead: @instrument_tool against a hand-written span doing the same recording.

Both sides run in one process, on one tracer provider (a BatchSpanProcessor to an exporter
that discards), with the same span attributes and the same metric updates (the call counter
with its trace_id exemplar, and the duration histogram). Rounds alternate between the sides so
machine noise hits both; the figures are medians over rounds. Also measured: a decorated call
when configure() was never called, against the bare function.

    python benchmarks/bench_decorator.py [--calls 20000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import telemetry
from telemetry import conventions as c


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def bare_tool(key: str, value: str) -> dict[str, Any]:
    return {"ok": True, "key": key}


def per_call_us(fn: Callable[..., Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn("plan", "v2")
    return (time.perf_counter() - start) / calls * 1e6


def measure(calls: int, rounds: int) -> dict[str, float]:
    decorated = telemetry.instrument_tool(name="bench_tool", kind="write")(bare_tool)
    # Unconfigured first: no runtime exists yet.
    unconfigured = [per_call_us(decorated, calls) for _ in range(rounds)]
    bare = [per_call_us(bare_tool, calls) for _ in range(rounds)]

    rt = telemetry.configure(service_name="bench", traces_dir=None, extra_exporters=[Discard()], install_global=False)
    tracer, metrics = rt.tracer, rt.metrics
    static = dict(decorated.__outcome_telemetry__.static_attributes)  # type: ignore[attr-defined]

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

    decorated_us: list[float] = []
    hand_us: list[float] = []
    with telemetry.agent("bench-agent"):
        per_call_us(decorated, calls // 4)  # warm both paths
        per_call_us(hand_written, calls // 4)
        for _ in range(rounds):
            decorated_us.append(per_call_us(decorated, calls))
            hand_us.append(per_call_us(hand_written, calls))
    rt.shutdown()
    d, h = statistics.median(decorated_us), statistics.median(hand_us)
    u, b = statistics.median(unconfigured), statistics.median(bare)
    return {
        "decorated_us": round(d, 2),
        "hand_written_us": round(h, 2),
        "ratio_decorated_to_hand_written": round(d / h, 3),
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
    print("decorator overhead (medians, microseconds per call)")
    print(f"  hand-written span + same metrics : {result['hand_written_us']:8.2f}")
    print(f"  @instrument_tool                 : {result['decorated_us']:8.2f}")
    print(f"  ratio (target <= 1.15)           : {result['ratio_decorated_to_hand_written']:8.3f}")
    print(f"  bare function                    : {result['bare_us']:8.3f}")
    print(f"  decorated, never configured      : {result['unconfigured_us']:8.3f}")
    print(f"  overhead unconfigured (<= 2.0)   : {result['unconfigured_overhead_us']:8.3f}")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""observe_tool_spans' cost: what the processor adds at a peer tool span's end and at any other span's end.

Two measures, each a median over alternating rounds in one process:

- **on_end alone**: ``observer.on_end(span)`` on spans already ended (built once by a real SDK
  provider, so their attributes are the SDK's own), against the same loop calling a processor
  that does nothing: the processor's own work, with the loop's cost taken out.
- **through a provider**: a span started and ended on a provider with the processor, against the
  same span on a provider without it: also what the SDK pays to call one more processor
  (``on_start``, ``_on_ending``, ``on_end``).

The spans: a peer tool span as pydantic-ai writes one (GenAI ``execute_tool`` with its ten
attributes, the recorded result ``{"success": false, "error": "quota_exceeded"}``, so the whole
path runs: the format, the envelope rules, the counts held for three counters, the histogram and
the exemplar; handing them to prometheus-client's values happens once per collection of the
metrics, whatever the number of spans since, and is not in these per-span figures), the same span
with a good result, an LLM span (``gen_ai.operation.name = chat``, a dozen attributes:
the marker is there, its value is not a tool's) and a plain HTTP span. The processor remembers
the verdict of each short result text (tools return the same few texts again and again); a
last row, reported beside the target, gives every span a result text of its own (more distinct
texts than it remembers), so each is parsed and judged. Beside them, what a team would write
instead: a hand-written processor for one format (GenAI) and one envelope
(``{"success": false, "error": ...}``) with prometheus-client's public API, on the same tool
spans (:class:`HandWritten`). Targets (issue 34): at most
3 µs per peer tool span, 0.3 µs per other span. CPU time of the process is the clock (see
bench_decorator.py for why).

    python benchmarks/bench_observe.py [--spans 20000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry, Counter, Histogram

import telemetry
from telemetry import conventions as c

FAILED = json.dumps({"success": False, "error": "quota_exceeded"}, separators=(",", ":"))
GOOD = json.dumps({"order_id": "o-5", "state": "shipped"}, separators=(",", ":"))
TOOL_ATTRIBUTES: dict[str, Any] = {
    c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL,
    c.GEN_AI_TOOL_NAME: "charge_card",
    c.GEN_AI_TOOL_CALL_ID: "call_charge_1",
    c.GEN_AI_TOOL_CALL_ARGUMENTS: '{"customer_id":"c-1","amount_cents":3200}',
    c.GEN_AI_AGENT_NAME: "support",
    "gen_ai.agent.call.id": "01a23469-acca-7104-9a7e-45effc946209",
    c.GEN_AI_CONVERSATION_ID: "01a23469-acca-7104-9a7e-45f0e78efde2",
    "logfire.msg": "running tool: charge_card",
    "logfire.json_schema": '{"type":"object","properties":{"gen_ai.tool.call.arguments":{"type":"object"}}}',
}
LLM_ATTRIBUTES: dict[str, Any] = {
    c.GEN_AI_OPERATION_NAME: "chat",
    c.GEN_AI_AGENT_NAME: "support",
    c.GEN_AI_CONVERSATION_ID: "01a23469-acca-7104-9a7e-45f0e78efde2",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4.1",
    "gen_ai.response.model": "gpt-4.1-2025-04-14",
    "gen_ai.usage.input_tokens": 52,
    "gen_ai.usage.output_tokens": 4,
    "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"charge c-1"}]}]',
    "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"tool_call","name":"charge_card"}]}]',
    "server.address": "api.openai.com",
    "server.port": 443,
}
HTTP_ATTRIBUTES: dict[str, Any] = {
    "http.request.method": "POST",
    "url.full": "https://api.example.com/v1/charges",
    "http.response.status_code": 200,
    "server.address": "api.example.com",
    "network.protocol.version": "1.1",
}
SPANS: dict[str, tuple[str, dict[str, Any]]] = {
    "peer tool span, failure result": ("execute_tool charge_card", {**TOOL_ATTRIBUTES, c.GEN_AI_TOOL_CALL_RESULT: FAILED}),
    "peer tool span, good result": ("execute_tool charge_card", {**TOOL_ATTRIBUTES, c.GEN_AI_TOOL_CALL_RESULT: GOOD}),
    "LLM span (gen_ai chat)": ("chat gpt-4.1", LLM_ATTRIBUTES),
    "plain HTTP span": ("POST /v1/charges", HTTP_ATTRIBUTES),
}
NEW_RESULTS = "peer tool span, a result text never seen"
DISTINCT = 4096
"""Distinct result texts the last row cycles through (more than the processor remembers)."""
TOOL_KINDS = ("peer tool span, failure result", "peer tool span, good result")
OTHER_KINDS = ("LLM span (gen_ai chat)", "plain HTTP span")
HAND = "hand-written GenAI-only processor: "


class HandWritten(SpanProcessor):
    """What a team would write instead for one format and one envelope: on a GenAI ``execute_tool``
    span, the recorded result parsed, ``{"success": false, "error": ...}`` read as the outcome, a
    call counted by tool and outcome, a failure the status left OK or unset counted again, the
    duration observed. prometheus-client's public API, one format, one shape, no exemplars."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter("hand_tool_calls", "calls", ["tool", "outcome"], registry=registry)
        self.masked = Counter("hand_masked_failures", "masked", ["tool", "outcome"], registry=registry)
        self.duration = Histogram("hand_tool_call_duration_seconds", "duration", ["tool"], registry=registry)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if attributes.get(c.GEN_AI_OPERATION_NAME) != c.OPERATION_EXECUTE_TOOL:
            return
        tool = str(attributes.get(c.GEN_AI_TOOL_NAME))
        outcome = "ok"
        text = attributes.get(c.GEN_AI_TOOL_CALL_RESULT)
        if isinstance(text, str):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if isinstance(value, dict) and value.get("success") is False:
                outcome = str(value.get("error") or "error")
        self.calls.labels(tool, outcome).inc()
        if outcome != "ok" and span.status.status_code is not StatusCode.ERROR:
            self.masked.labels(tool, outcome).inc()
        if span.start_time is not None and span.end_time is not None:
            self.duration.labels(tool).observe((span.end_time - span.start_time) / 1e9)


class Nothing(SpanProcessor):
    """The baseline processor: each of its methods returns at once."""

    def on_end(self, span: ReadableSpan) -> None:
        return None


def ended(name: str, attributes: dict[str, Any]) -> ReadableSpan:
    """One span as a real SDK provider hands it to ``on_end``."""
    kept: list[ReadableSpan] = []

    class Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            kept.append(span)

    provider = TracerProvider()
    provider.add_span_processor(Keep())
    with provider.get_tracer("a-peer-instrumentation").start_as_current_span(name, attributes=attributes):
        pass
    provider.shutdown()
    return kept[0]


def cpu_us(loop: Callable[[int], None], n: int) -> float:
    started = time.process_time()
    loop(n)
    return (time.process_time() - started) / n * 1e6


def on_end_loop(processor: SpanProcessor, spans: list[ReadableSpan]) -> Callable[[int], None]:
    on_end = processor.on_end
    mask = len(spans) - 1  # a power of two

    def loop(n: int) -> None:
        for i in range(n):
            on_end(spans[i & mask])

    return loop


def distinct_results() -> list[ReadableSpan]:
    """Tool spans alike but for their result text, each distinct (``DISTINCT`` of them)."""
    name = SPANS["peer tool span, good result"][0]
    return [
        ended(name, {**TOOL_ATTRIBUTES, c.GEN_AI_TOOL_CALL_RESULT: json.dumps({"order_id": f"o-{i}", "state": "shipped"})})
        for i in range(DISTINCT)
    ]


def provider_loop(provider: TracerProvider, name: str, attributes: dict[str, Any]) -> Callable[[int], None]:
    tracer = provider.get_tracer("a-peer-instrumentation")

    def loop(n: int) -> None:
        for _ in range(n):
            tracer.start_span(name, attributes=attributes).end()

    return loop


def measure(spans: int, rounds: int) -> dict[str, Any]:
    observer = telemetry.observe_tool_spans(registry=CollectorRegistry())
    nothing = Nothing()
    with_observer, without = TracerProvider(), TracerProvider()
    with_observer.add_span_processor(observer)
    without.add_span_processor(Nothing())  # the same number of processors but one
    pairs: dict[str, tuple[Callable[[int], None], Callable[[int], None]]] = {}
    for kind, (name, attributes) in SPANS.items():
        span = [ended(name, attributes)]
        pairs["on_end: " + kind] = (on_end_loop(observer, span), on_end_loop(nothing, span))
        pairs["provider: " + kind] = (provider_loop(with_observer, name, attributes), provider_loop(without, name, attributes))
    new = distinct_results()
    pairs["on_end: " + NEW_RESULTS] = (on_end_loop(observer, new), on_end_loop(nothing, new))
    hand = HandWritten(CollectorRegistry())
    for kind in TOOL_KINDS:
        span = [ended(*SPANS[kind])]
        pairs[HAND + kind] = (on_end_loop(hand, span), on_end_loop(nothing, span))
    samples: dict[str, list[tuple[float, float]]] = {key: [] for key in pairs}
    for ours, base in pairs.values():  # warm every path (the counters' children, the caches)
        ours(spans // 10)
        base(spans // 10)
    for _ in range(rounds):
        for key, (ours, base) in pairs.items():
            samples[key].append((cpu_us(ours, spans), cpu_us(base, spans)))
    with_observer.shutdown()
    without.shutdown()
    result: dict[str, Any] = {"spans_per_round": spans, "rounds": rounds, "steps": {}}
    for key, rows in samples.items():
        ours_us = statistics.median(r[0] for r in rows)
        base_us = statistics.median(r[1] for r in rows)
        added = statistics.median(r[0] - r[1] for r in rows)
        result["steps"][key] = {"with_us": round(ours_us, 3), "without_us": round(base_us, 3), "added_us": round(added, 3)}
    steps = result["steps"]
    result["peer_tool_span_added_us"] = max(steps["on_end: " + k]["added_us"] for k in TOOL_KINDS)
    result["other_span_added_us"] = max(steps["on_end: " + k]["added_us"] for k in OTHER_KINDS)
    result["peer_tool_span_new_result_added_us"] = steps["on_end: " + NEW_RESULTS]["added_us"]
    result["hand_written_tool_span_added_us"] = max(steps[HAND + k]["added_us"] for k in TOOL_KINDS)
    result["peer_tool_span_to_hand_written"] = round(
        result["peer_tool_span_added_us"] / result["hand_written_tool_span_added_us"], 3)
    result["peer_tool_span_added_through_provider_us"] = max(steps["provider: " + k]["added_us"] for k in TOOL_KINDS)
    result["other_span_added_through_provider_us"] = max(steps["provider: " + k]["added_us"] for k in OTHER_KINDS)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=20_000, help="spans per round and side (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("bench-output/observe.json"))
    ns = parser.parse_args(argv)
    result = measure(ns.spans, ns.rounds)
    print("observe_tool_spans (medians, CPU microseconds per span)                   with  without    added")
    for key, row in result["steps"].items():
        print(f"  {key:<66}: {row['with_us']:7.3f} {row['without_us']:8.3f} {row['added_us']:8.3f}")
    print(f"  {'added at a peer tool span (on_end, target <= 3.0)':<66}: {result['peer_tool_span_added_us']:25.3f}")
    print(f"  {'added at any other span (on_end, target <= 0.3)':<66}: {result['other_span_added_us']:25.3f}")
    print(f"  {'added at a peer tool span whose result text is new (on_end)':<66}: {result['peer_tool_span_new_result_added_us']:25.3f}")
    print(f"  {'a hand-written GenAI-only processor at the same tool spans':<66}: {result['hand_written_tool_span_added_us']:25.3f}")
    print(f"  {'observe_tool_spans vs the hand-written processor (tool spans)':<66}: {result['peer_tool_span_to_hand_written']:24.2f}x")
    print(f"  {'added at a peer tool span, through a provider':<66}: {result['peer_tool_span_added_through_provider_us']:25.3f}")
    print(f"  {'added at any other span, through a provider':<66}: {result['other_span_added_through_provider_us']:25.3f}")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

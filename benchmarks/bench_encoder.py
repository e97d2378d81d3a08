"""Span encoding cost: the file exporter's encoder beside the SDK's OTLP protobuf encoder.

The same spans go through each encoder, in lines of 64 as the file exporter writes them:

- ``otlp_text.encode_line``: what the file exporter uses (OTLP JSON text, cached fragments);
- ``json.dumps(otlp_json.encode_traces_data(...))``: the dict-building reference encoder;
- the SDK's ``trace_encoder.encode_spans(...).SerializeToString()``: what the OTLP exporter pays
  per span before it sends anything.

The spans are tool spans as the decorator writes them (agent, a recorded argument with 50
different values, outcomes ok and not ok, one in ten with an exception event). The figure is CPU
time per span (``time.process_time``, best of rounds), which is what the batch thread takes
from the tools on a busy machine; wall time moves with whatever else the machine runs.

    python benchmarks/bench_encoder.py [--spans 6400] [--rounds 9]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

import telemetry
from telemetry import testing
from telemetry.runtime._otlp_json import encode_traces_data
from telemetry.runtime._otlp_text import encode_line

LINE = 64


def make_spans(count: int) -> list[ReadableSpan]:
    """Tool spans as the decorator records them, with some variety."""

    @telemetry.instrument_tool(name="write_record", kind="write", record_arguments=["key", "amount"])
    def write_record(key: str, amount: float) -> dict[str, Any]:
        if amount < 0:
            raise ValueError("negative amount")
        return {"ok": amount < 90, "error": "over_limit"}

    with testing.capture() as cap:
        with telemetry.agent("billing-agent", conversation_id="conv-1"):
            for i in range(count):
                try:
                    write_record(f"customer-{i % 50}", -1.0 if i % 10 == 0 else float(i % 100))
                except ValueError:
                    pass
        return cap.spans()


def cpu_us_per_span(encode: Callable[[Sequence[ReadableSpan]], object], spans: list[ReadableSpan], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for i in range(0, len(spans), LINE):
            encode(spans[i : i + LINE])
        best = min(best, time.process_time() - started)
    return best / len(spans) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=6400, help="spans to encode per round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds, best taken (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("bench-output/encoder.json"))
    ns = parser.parse_args(argv)
    spans = make_spans(ns.spans)
    first = spans[:LINE]
    if json.loads(encode_line(first)) != json.loads(json.dumps(encode_traces_data(first))):
        print("the file encoder's output differs from the reference encoder's", file=sys.stderr)
        return 1
    encoders: dict[str, Callable[[Sequence[ReadableSpan]], object]] = {
        "file_exporter_text": encode_line,
        "reference_dicts_json": lambda batch: json.dumps(encode_traces_data(batch), separators=(",", ":")),
        "sdk_otlp_protobuf": lambda batch: encode_spans(batch).SerializeToString(),
    }
    result = {name: round(cpu_us_per_span(fn, spans, ns.rounds), 2) for name, fn in encoders.items()}
    print("span encoding (CPU microseconds per span, best of rounds)")
    print(f"  file exporter (OTLP JSON text, target <= 8) : {result['file_exporter_text']:7.2f}")
    print(f"  reference encoder (dicts + json.dumps)      : {result['reference_dicts_json']:7.2f}")
    print(f"  SDK OTLP protobuf encoder                   : {result['sdk_otlp_protobuf']:7.2f}")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Peers: @instrument_tool beside other instrumentations' tool decorators, all against one baseline.

Each candidate runs in a process of its own (traceloop and logfire install global state), and in
that process its calls alternate, round by round, with the baseline's calls; each round's time
includes flushing its spans, and the figures are medians over rounds, on two clocks: wall time
and the process's CPU time (every thread, so a batch thread's encoding counts). The ratio to the
baseline is what to compare; the microseconds move with the machine.

The baseline is the hand-written tool of ``bench_decorator.py``: an SDK span with the same
attributes as ours (the triad among them), a prometheus counter with its trace-id exemplar and a
histogram, exported through a ``BatchSpanProcessor`` to an exporter that discards.

The candidates, on the same two-argument tool returning ``{"ok": True, ...}``:

- ours, default configuration: ``configure()`` as a user calls it, spans written to the trace file
  (the file exporter), counters and histogram in the registry;
- ours, spans discarded: ``configure(traces_dir=None, extra_exporters=[Discard()])``;
- traceloop-sdk's ``@tool``: ``Traceloop.init(exporter=Discard())`` (batching; with a custom
  exporter it records no metrics);
- logfire's ``@instrument``: ``logfire.configure(send_to_logfire=False, console=False,
  metrics=False, additional_span_processors=[BatchSpanProcessor(Discard())])``;
- openinference's ``tracer.tool``: an ``OITracer`` over an SDK provider batching to ``Discard()``.

The peers record no metrics; we and the baseline do. A peer that is not installed is skipped,
and the output says so (they come with the ``bench`` extra). Every candidate's exporter counts
what it was given, so a peer set up to record nothing fails the run instead of looking fast.

    python benchmarks/bench_peers.py [--calls 10000] [--rounds 15] [--only NAME]

Prints the table, writes ``bench-output/peers.json``. Targets: ours by default at most 1.25x the
baseline, ours with spans discarded at most 1.10x.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_decorator import bare_tool, hand_written_tool, timed  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

import telemetry  # noqa: E402
from telemetry.runtime._metrics import ToolMetrics  # noqa: E402

TARGET_DEFAULT = 1.25
TARGET_DISCARDED = 1.10
TOOL = "bench_tool"


class Counting(SpanExporter):
    """Discards spans, counting them: a candidate whose spans never arrive fails the run."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


@dataclass(frozen=True)
class Candidate:
    name: str
    label: str
    module: str | None
    """The module whose absence skips the candidate (None: ours, always there)."""
    distribution: str | None
    target: float | None = None


CANDIDATES = (
    Candidate("ours_default", "@instrument_tool, default configuration (file exporter)", None, None, TARGET_DEFAULT),
    Candidate("ours_discarded", "@instrument_tool, spans discarded", None, None, TARGET_DISCARDED),
    Candidate("traceloop", "traceloop-sdk @tool (no metrics)", "traceloop.sdk", "traceloop-sdk"),
    Candidate("logfire", "logfire @instrument (no metrics)", "logfire", "logfire"),
    Candidate("openinference", "openinference tracer.tool (no metrics)", "openinference.instrumentation",
              "openinference-instrumentation"),
)
BY_NAME = {candidate.name: candidate for candidate in CANDIDATES}

Setup = tuple[Callable[..., Any], Callable[[], object], Callable[[], int], Callable[[], None]]
"""The decorated tool, its flush, how many spans it has exported so far, and its shutdown."""


def _ours(folder: Path, discarded: bool) -> Setup:
    decorated = telemetry.instrument_tool(name=TOOL, kind="write")(bare_tool)
    if discarded:
        counting = Counting()
        rt = telemetry.configure(service_name="bench", traces_dir=None, extra_exporters=[counting], install_global=False)
        return decorated, rt.force_flush, lambda: counting.spans, rt.shutdown
    rt = telemetry.configure(service_name="bench", traces_dir=folder, install_global=False)

    def written() -> int:
        path = rt.trace_file
        return 0 if path is None or not path.exists() else path.stat().st_size

    return decorated, rt.force_flush, written, rt.shutdown


def _traceloop() -> Setup:
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    from opentelemetry import trace
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import tool

    counting = Counting()
    Traceloop.init(app_name="bench", exporter=counting, disable_batch=False, telemetry_enabled=False, instruments=set())
    decorated = tool(name=TOOL)(bare_tool)
    provider: Any = trace.get_tracer_provider()
    return decorated, provider.force_flush, lambda: counting.spans, provider.shutdown


def _logfire() -> Setup:
    import logfire

    counting = Counting()
    logfire.configure(send_to_logfire=False, console=False, metrics=False, service_name="bench",
                      additional_span_processors=[BatchSpanProcessor(counting)])
    decorated = logfire.instrument("execute_tool " + TOOL)(bare_tool)
    return decorated, logfire.force_flush, lambda: counting.spans, logfire.shutdown


def _openinference() -> Setup:
    from openinference.instrumentation import OITracer, TraceConfig

    counting = Counting()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(counting))
    tracer = OITracer(provider.get_tracer("bench"), config=TraceConfig())
    decorated = tracer.tool(name=TOOL)(bare_tool)
    return decorated, provider.force_flush, lambda: counting.spans, provider.shutdown


def measure(name: str, calls: int, rounds: int) -> dict[str, Any]:
    """In this process: ``name`` and the baseline in alternating rounds; medians per call."""
    static = dict(telemetry.instrument_tool(name=TOOL, kind="write")(bare_tool).__outcome_telemetry__.static_attributes)  # type: ignore[attr-defined]
    baseline_exporter = Counting()
    baseline_provider = TracerProvider()
    baseline_provider.add_span_processor(BatchSpanProcessor(baseline_exporter))
    baseline = hand_written_tool(baseline_provider.get_tracer("bench"), ToolMetrics(CollectorRegistry()), static)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as folder:
        setups: dict[str, Callable[[], Setup]] = {
            "ours_default": lambda: _ours(Path(folder), discarded=False),
            "ours_discarded": lambda: _ours(Path(folder), discarded=True),
            "traceloop": _traceloop,
            "logfire": _logfire,
            "openinference": _openinference,
        }
        decorated, flush, exported, shutdown = setups[name]()
        sides = {"candidate": (decorated, flush), "baseline": (baseline, baseline_provider.force_flush)}
        timings: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        with telemetry.agent("bench-agent"):
            for fn, side_flush in sides.values():  # warm every path
                timed(fn, calls // 4, side_flush)
            for _ in range(rounds):
                for side, (fn, side_flush) in sides.items():
                    timings[side].append(timed(fn, calls, side_flush))
        recorded = exported()
        shutdown()
    baseline_provider.shutdown()
    if not recorded or not baseline_exporter.spans:
        raise SystemExit(f"{name}: its spans never reached the exporter ({recorded}); the setup records nothing")
    result: dict[str, Any] = {"calls_per_round": calls, "rounds": rounds}
    for clock, index in (("wall", 0), ("cpu", 1)):
        mine, base = (statistics.median(t[index] for t in timings[side]) for side in ("candidate", "baseline"))
        result |= {f"{clock}_us": round(mine, 2), f"{clock}_baseline_us": round(base, 2),
                   f"{clock}_ratio": round(mine / base, 3)}
    return result


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (its parent packages are imported to find out, not it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def run_candidate(candidate: Candidate, calls: int, rounds: int) -> dict[str, Any]:
    """One candidate in a fresh process (its figures), or why it was skipped or failed."""
    if candidate.module is not None and not installed(candidate.module):
        return {"skipped": f"{candidate.distribution} is not installed (pip install -e '.[bench]')"}
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = Path(out.name)
    try:
        command = [sys.executable, __file__, "--candidate", candidate.name, "--calls", str(calls),
                   "--rounds", str(rounds), "--result", str(path)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not path.stat().st_size:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"failed": f"exit {done.returncode}: {tail[0]}"}
        figures: dict[str, Any] = json.loads(path.read_text())
        return figures
    finally:
        path.unlink(missing_ok=True)


def report(results: dict[str, dict[str, Any]], load: tuple[float, float]) -> None:
    print(f"load average (1 min): {load[0]:.2f} at start, {load[1]:.2f} at the end")
    print("tool decorators against one hand-written span + counter + histogram to a discarding exporter")
    print("(each candidate in its own process, alternating rounds, medians, flush included)")
    print(f"  {'candidate':<56} {'x wall':>7} {'x CPU':>7} {'us CPU':>8} {'base CPU':>9}  target")
    for name, row in results.items():
        candidate = BY_NAME[name]
        if "skipped" in row or "failed" in row:
            print(f"  {candidate.label:<56} {'skipped: ' + row['skipped'] if 'skipped' in row else 'FAILED: ' + row['failed']}")
            continue
        target = ""
        if candidate.target is not None:
            target = f"<= {candidate.target:.2f}x {'met' if row['cpu_ratio'] <= candidate.target else 'NOT met'} (CPU)"
        print(f"  {candidate.label:<56} {row['wall_ratio']:7.3f} {row['cpu_ratio']:7.3f} {row['cpu_us']:8.2f} "
              f"{row['cpu_baseline_us']:9.2f}  {target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10_000, help="calls per round and side (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds (default %(default)s)")
    parser.add_argument("--only", action="append", choices=sorted(BY_NAME), default=[], help="run only this candidate")
    parser.add_argument("--out", type=Path, default=Path("bench-output/peers.json"))
    parser.add_argument("--candidate", choices=sorted(BY_NAME), help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.candidate:
        ns.result.write_text(json.dumps(measure(ns.candidate, ns.calls, ns.rounds)))
        return 0
    start = os.getloadavg()[0]
    results = {c.name: run_candidate(c, ns.calls, ns.rounds) for c in CANDIDATES if not ns.only or c.name in ns.only}
    load = (start, os.getloadavg()[0])
    report(results, load)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps({"load_average_1m_at_start": round(load[0], 2),
                                  "load_average_1m_at_end": round(load[1], 2), **results}, indent=2))
    return 1 if any("failed" in row for row in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: ``outcome-telemetry watch`` catching up on a trace file, then passes over a full window.

    python benchmarks/bench_watch.py --spans 1000000

Generates the span set with the forensics benchmark's writer (realistic crew runs, planted
incidents), then, in one process with the default read budget: the catch-up (back-to-back
passes until every line is read: sustained spans/s, each pass's time), and three steady passes
over the whole window with nothing new (what every interval costs once caught up). The window
is set wide enough to hold every span. Target: a steady pass over 1M spans under the default
interval (15 s). Prints a table and writes ``bench-output/watch.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_client import CollectorRegistry  # noqa: E402

from telemetry.forensics.watch import Watcher, WatchOptions  # noqa: E402
from telemetry.forensics.watch._cli import build_parser  # noqa: E402

from bench_forensics import generate  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000)
    ns = parser.parse_args(argv)
    interval = build_parser().get_default("interval")
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as folder:
        traces = Path(folder) / "traces"
        traces.mkdir()
        generate(traces / "bench.jsonl", ns.spans)
        size = (traces / "bench.jsonl").stat().st_size
        w = Watcher(WatchOptions(paths=(str(traces),), window=1e9, settle=0.0), registry=CollectorRegistry())
        try:
            started = time.perf_counter()
            catch_up = []
            while True:
                result = w.run_pass()
                catch_up.append(result.seconds)
                if not result.backlog:
                    break
            elapsed = time.perf_counter() - started
            spans = w.window.spans
            steady = [w.run_pass().seconds for _ in range(3)]
            window = w.window.spans
        finally:
            w.close()
    figures = {
        "spans": spans, "megabytes": round(size / 1e6, 1), "window_spans": window,
        "catch_up_seconds": round(elapsed, 2), "sustained_spans_per_second": round(spans / elapsed),
        "catch_up_pass_seconds": [round(s, 2) for s in catch_up],
        "steady_pass_seconds": [round(s, 2) for s in steady], "default_interval_seconds": interval,
        "steady_pass_within_interval": max(steady) < interval,
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(f"watch over {spans:,} spans ({figures['megabytes']} MB OTLP JSON), window {window:,} spans")
    print(f"  catch-up: {elapsed:.1f} s in {len(catch_up)} pass(es) ({', '.join(f'{s:.1f}' for s in catch_up)} s): "
          f"{figures['sustained_spans_per_second']:,} spans/s sustained")
    print(f"  steady pass over the full window: {', '.join(f'{s:.2f}' for s in steady)} s "
          f"(default interval {interval:g} s: {'within' if figures['steady_pass_within_interval'] else 'NOT within'})")
    print(f"  max RSS {figures['max_rss_mb']} MB")
    out = Path("bench-output")
    out.mkdir(exist_ok=True)
    (out / "watch.json").write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

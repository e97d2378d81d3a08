"""What a process killed outright (SIGKILL) loses from its trace file, with default settings.

A child process calls a trivial decorated tool from several threads, either paced to a steady
rate (``--rate``, calls per second in total) or as fast as it can (``--rate 0``), and keeps, in
a shared memory map, how many calls of each thread have returned. The parent kills it with
SIGKILL after ``--seconds``, then counts the spans in the file it left. Lost = calls returned
minus spans in the file (a call counts once its span ended, so the loss is never overstated by
more than one call per thread).

    python benchmarks/bench_kill.py [--rate 2000] [--seconds 5] [--threads 8] [--runs 3]

With ``--keep DIR`` the trace folder is kept in DIR (the tests read it with forensics).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = r"""
import mmap, struct, sys, threading, time
import telemetry

counts_path, traces, threads, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

@telemetry.instrument_tool(kind="write")
def record(i: int) -> dict:
    return {"ok": True, "i": i}

with open(counts_path, "r+b") as f:
    counts = mmap.mmap(f.fileno(), 8 * threads)
telemetry.configure(service_name="kill9", traces_dir=traces)
per_thread = rate / threads if rate > 0 else 0.0

def work(slot: int) -> None:
    done = 0
    started = time.perf_counter()
    while True:
        record(done)
        done += 1
        struct.pack_into("q", counts, 8 * slot, done)
        if per_thread:
            wait = started + done / per_thread - time.perf_counter()
            if wait > 0:
                time.sleep(wait)

for slot in range(threads):
    threading.Thread(target=work, args=(slot,), daemon=True).start()
print("running", flush=True)
time.sleep(3600)
"""


def spans_in(directory: Path) -> int:
    """Spans in the folder's OTLP JSON lines files; a line cut short by the kill holds none."""
    total = 0
    for path in directory.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue  # the line being written when the process died
            total += sum(len(ss["spans"]) for rs in data["resourceSpans"] for ss in rs["scopeSpans"])
    return total


def kill_once(rate: float, seconds: float, threads: int, traces: Path) -> dict[str, Any]:
    """Run the child, SIGKILL it after ``seconds`` of calls, and count what reached the file."""
    with tempfile.NamedTemporaryFile(delete=False) as counts_file:
        counts_file.write(b"\0" * 8 * threads)
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, counts_file.name, str(traces), str(threads), str(rate)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        if child.stdout.readline().strip() != "running":
            child.kill()
            raise RuntimeError("the child process did not start")
        time.sleep(seconds)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        with open(counts_file.name, "rb") as f:
            counts = mmap.mmap(f.fileno(), 8 * threads, access=mmap.ACCESS_READ)
            returned = sum(struct.unpack_from("q", counts, 8 * i)[0] for i in range(threads))
            counts.close()
    finally:
        os.unlink(counts_file.name)
    written = spans_in(traces)
    lost = max(0, returned - written)
    achieved = returned / seconds
    return {
        "calls_returned": returned,
        "spans_in_file": written,
        "spans_lost": lost,
        "calls_per_second": round(achieved),
        "lost_ms_of_calls": round(lost / achieved * 1000, 1) if achieved else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, action="append", help="calls/s in total; 0 = full speed (default: 2000 and 0)")
    parser.add_argument("--seconds", type=float, default=5.0, help="calls before the kill (default %(default)s)")
    parser.add_argument("--threads", type=int, default=8, help="calling threads (default %(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="kills per rate (default %(default)s)")
    parser.add_argument("--keep", type=Path, help="keep the last run's trace folder here")
    parser.add_argument("--out", type=Path, default=Path("bench-output/kill.json"))
    ns = parser.parse_args(argv)
    results: dict[str, Any] = {}
    print("SIGKILL loss with default configure() (per run: calls returned, spans in file, lost)")
    for rate in ns.rate or [2000.0, 0.0]:
        runs = []
        for _ in range(ns.runs):
            with tempfile.TemporaryDirectory() as scratch:
                traces = ns.keep if ns.keep is not None else Path(scratch) / "traces"
                runs.append(kill_once(rate, ns.seconds, ns.threads, traces))
        label = f"{rate:.0f}/s" if rate else "full speed"
        for run in runs:
            print(f"  {label:>10}: {run['calls_returned']:7d} returned at {run['calls_per_second']:6d}/s, "
                  f"{run['spans_in_file']:7d} in file, {run['spans_lost']:5d} lost ({run['lost_ms_of_calls']} ms of calls)")
        results[label] = {"runs": runs, "median_lost": statistics.median(r["spans_lost"] for r in runs),
                          "max_lost": max(r["spans_lost"] for r in runs)}
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

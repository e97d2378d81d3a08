"""Guarded write throughput: ``StateStore.write_state`` against a bare SQLite ``UPDATE`` of the same row.

One process, one database file (WAL, ``synchronous=NORMAL``, the store's settings), one row.
Three sides, in alternating rounds so machine noise hits all of them; figures are medians:

- bare: ``UPDATE guard_state SET value = ? WHERE key = ?`` on its own connection (autocommit);
- guarded: ``write_state`` with telemetry not configured (the compare-and-set, the change-log
  row, the input checks);
- guarded + instrumented: ``write_state`` with ``configure()`` active (a BatchSpanProcessor to
  an exporter that discards), so it adds the span, the counters and the database read-back;
- and, for scale, the same decorator on a write tool that does nothing (the instrumentation's
  own cost, which no guard can go below).

    python benchmarks/bench_guards.py [--writes 5000] [--rounds 9]

Prints the table and the ratio, writes ``bench-output/guards.json``. Target: the
guarded, instrumented write costs at most 3x the bare update.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

import telemetry  # noqa: E402
from telemetry.guards import ABSENT_VERSION, SQLiteStore, StateStore  # noqa: E402
from telemetry.guards.sqlite import BUSY_TIMEOUT_MS  # noqa: E402

KEY = "bench/row"
TARGET_RATIO = 3.0


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def bare_us(conn: sqlite3.Connection, writes: int) -> float:
    start = time.perf_counter()
    for i in range(writes):
        conn.execute("UPDATE guard_state SET value = ? WHERE key = ?", (str(i), KEY))
    return (time.perf_counter() - start) / writes * 1e6


def guarded_us(state: StateStore, writes: int) -> float:
    version = state.read_state(KEY)["version"]  # outside the timing: the bare side moved the row
    start = time.perf_counter()
    for i in range(writes):
        result = state.write_state(KEY, i, version)
        version = result["version"]
    elapsed = time.perf_counter() - start
    assert result["ok"], result
    return elapsed / writes * 1e6


@telemetry.instrument_tool(name="bench_noop_write", kind="write")
def noop_write(key: str, value: int, expected_version: str) -> dict[str, Any]:
    """The same decorator on a tool that does nothing: the instrumentation's own floor."""
    return {"ok": True, "key": key, "version": expected_version}


def noop_us(writes: int) -> float:
    start = time.perf_counter()
    for i in range(writes):
        noop_write(KEY, i, "v")
    return (time.perf_counter() - start) / writes * 1e6


def measure(writes: int, rounds: int, folder: Path) -> dict[str, Any]:
    path = folder / "bench.db"
    state = StateStore(SQLiteStore(path))
    state.write_state(KEY, 0, ABSENT_VERSION)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    bare_us(conn, writes // 4)  # warm up both paths
    guarded_us(state, writes // 4)
    bare: list[float] = []
    guarded: list[float] = []
    instrumented: list[float] = []
    floor: list[float] = []
    runtime = telemetry.configure(service_name="bench", traces_dir=None, extra_exporters=[Discard()], install_global=False)
    try:
        guarded_us(state, writes // 4)
        for _ in range(rounds):
            instrumented.append(guarded_us(state, writes))
            bare.append(bare_us(conn, writes))
            floor.append(noop_us(writes))
    finally:
        runtime.shutdown()
    for _ in range(rounds):
        guarded.append(guarded_us(state, writes))
        bare.append(bare_us(conn, writes))
    conn.close()
    b, g, i = statistics.median(bare), statistics.median(guarded), statistics.median(instrumented)
    f = statistics.median(floor)
    return {
        "writes_per_round": writes,
        "rounds": rounds,
        "bare_update_us": round(b, 2),
        "guarded_us": round(g, 2),
        "guarded_instrumented_us": round(i, 2),
        "instrumented_noop_us": round(f, 2),
        "ratio_guarded_to_bare": round(g / b, 2),
        "ratio_instrumented_noop_to_bare": round(f / b, 2),
        "ratio_guarded_instrumented_to_bare": round(i / b, 2),
        "instrumented_writes_per_second": round(1e6 / i),
        "bare_updates_per_second": round(1e6 / b),
        "target_ratio": TARGET_RATIO,
        "target_met": i / b <= TARGET_RATIO,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=5_000, help="writes per round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds per side (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("bench-output/guards.json"))
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-guards-") as folder:
        result = measure(ns.writes, ns.rounds, Path(folder))
    print("guarded writes on SQLite (medians, microseconds per write)")
    print(f"  bare UPDATE of the row              : {result['bare_update_us']:8.2f}")
    print(f"  write_state, telemetry off          : {result['guarded_us']:8.2f}  ({result['ratio_guarded_to_bare']:.2f}x)")
    print(f"  write_state, instrumented           : {result['guarded_instrumented_us']:8.2f}  "
          f"({result['ratio_guarded_instrumented_to_bare']:.2f}x, target <= {TARGET_RATIO:g}x: "
          f"{'met' if result['target_met'] else 'NOT met'})")
    print(f"  (an instrumented no-op write tool   : {result['instrumented_noop_us']:8.2f}  "
          f"({result['ratio_instrumented_noop_to_bare']:.2f}x): the span and counters alone)")
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

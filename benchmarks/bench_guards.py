"""Guarded writes on both stores: each against its own floor, and 4 x 8 contention on hot keys.

1. SQLite, one process, one row (WAL, ``synchronous=NORMAL``, the store's settings), in
   alternating rounds so machine noise hits every side; figures are medians:

   - bare: ``UPDATE guard_state SET value = ? WHERE key = ?`` on its own connection (autocommit);
   - guarded: ``write_state`` with telemetry not configured;
   - guarded + instrumented: ``write_state`` with ``configure()`` active (a BatchSpanProcessor to
     an exporter that discards): the span, the counters and the database read-back;
   - an instrumented write tool that does nothing (the instrumentation's own floor).

2. Each store's guarded write (telemetry off) against its floor, the hand-written code a user
   would write instead on the same database. On SQLite the floor is what the guard's contract
   needs: ``BEGIN IMMEDIATE``, ``UPDATE ... WHERE key = ? AND version = ?`` and the ``INSERT`` of
   its change-log row (with the value's SHA-256, as the log's ``value_hash`` must), ``COMMIT``; the compare-and-set alone (no change-log row) is timed beside
   it. On PostgreSQL the floor is the conditional ``UPDATE`` through a psycopg_pool pool of the
   store's default size whose block commits, and beside it the same on a dedicated connection.
   Both clocks: wall time, and this process's CPU time (on SQLite all the work is in this
   process, so CPU time is the steadier measure on a shared machine; on PostgreSQL it leaves out
   the server's share).

3. Contention: 4 processes x 8 threads of read-modify-write increments on 16 hot keys, per
   store, telemetry off and on; accepted writes a second, and p50, p99 and max of ``write_state``.

PostgreSQL is a server this script starts on loopback (Debian's binaries, as the tests do:
``fsync=on``, ``synchronous_commit=off``, which like SQLite's ``synchronous=NORMAL`` does not wait
for the disk at commit), or the one ``--pg-dsn`` names. Without PostgreSQL, its rows are skipped.

    python benchmarks/bench_guards.py [--writes 5000] [--rounds 9] [--increments 100] [--pg-dsn URL]

Prints the tables, writes ``bench-output/guards.json``. Targets: the guarded, instrumented write at
most 3x the bare update; telemetry off, the guarded write at most 1.25x its own floor on SQLite
and at most 1.0x on PostgreSQL (wall time); PostgreSQL's contention p99 below SQLite's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the PostgreSQL server helper the tests use
sys.path.insert(0, str(ROOT / "benchmarks"))

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

import telemetry  # noqa: E402
from telemetry.guards import ABSENT_VERSION, SQLiteStore, StateStore, open_store  # noqa: E402
from telemetry.guards._sqlite import BUSY_TIMEOUT_MS  # noqa: E402

import _guards_contention  # noqa: E402

KEY = "bench/row"
TARGET_RATIO = 3.0
TARGET_FLOOR_RATIO = {"sqlite": 1.25, "postgresql": 1.0}
"""Each store's guarded write (telemetry off) at most this many times its floor."""
PROCESSES, THREADS, HOT_KEYS = 4, 8, 16


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Timed:
    """Wall and CPU time of the block, in microseconds per write once ``per_write`` is called."""

    def __enter__(self) -> Timed:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def per_write(self, writes: int) -> tuple[float, float]:
        return self.wall / writes * 1e6, self.cpu / writes * 1e6


def bare_us(conn: sqlite3.Connection, writes: int) -> float:
    start = time.perf_counter()
    for i in range(writes):
        conn.execute("UPDATE guard_state SET value = ? WHERE key = ?", (str(i), KEY))
    return (time.perf_counter() - start) / writes * 1e6


def guarded_us(state: StateStore, writes: int) -> float:
    return guarded_clocks(state, writes)[0]


def guarded_clocks(state: StateStore, writes: int) -> tuple[float, float]:
    version = state.read_state(KEY)["version"]  # outside the timing: the bare side moved the row
    with Timed() as timed:
        for i in range(writes):
            result = state.write_state(KEY, i, version)
            version = result["version"]
    assert result["ok"], result
    return timed.per_write(writes)


@telemetry.instrument_tool(name="bench_noop_write", kind="write")
def noop_write(key: str, value: int, expected_version: str) -> dict[str, Any]:
    """The same decorator on a tool that does nothing: the instrumentation's own floor."""
    return {"ok": True, "key": key, "version": expected_version}


def noop_us(writes: int) -> float:
    start = time.perf_counter()
    for i in range(writes):
        noop_write(KEY, i, "v")
    return (time.perf_counter() - start) / writes * 1e6


def sqlite_cas_us(conn: sqlite3.Connection, writes: int, *, log: bool = False) -> tuple[float, float]:
    """The hand-written compare-and-set on SQLite: BEGIN IMMEDIATE, a conditional UPDATE, COMMIT;
    with ``log``, plus the change-log row the guard appends, by hand, in the same transaction.

    The row carries the value's SHA-256, as the log's ``value_hash`` must (a read-back of a
    since-replaced version compares against it); a constant there would be no change log."""
    version = conn.execute("SELECT version FROM guard_state WHERE key = ?", (KEY,)).fetchone()[0]
    with Timed() as timed:
        for i in range(writes):
            new = f"cas_{i}_{log}"
            value = str(i)
            conn.execute("BEGIN IMMEDIATE")
            cursor = conn.execute(
                "UPDATE guard_state SET value = ?, version = ? WHERE key = ? AND version = ?", (value, new, KEY, version)
            )
            if log:
                conn.execute(
                    "INSERT INTO guard_changes (key, version, previous_version, value_hash, actor, change_ref, forced, at) "
                    "VALUES (?, ?, ?, ?, NULL, NULL, 0, ?)",
                    (KEY, new, version, hashlib.sha256(value.encode()).hexdigest(), time.time()),
                )
            conn.execute("COMMIT")
            assert cursor.rowcount == 1
            version = new
    return timed.per_write(writes)


PG_CAS = "UPDATE guard_state SET value = %s, version = %s WHERE key = %s AND version = %s"


def pg_pooled_cas_us(pool: Any, writes: int) -> tuple[float, float]:
    """The hand-written compare-and-set through psycopg_pool: a connection per write, whose block
    commits the conditional UPDATE's transaction on exit."""
    with pool.connection() as conn:
        version = conn.execute("SELECT version FROM guard_state WHERE key = %s", (KEY,)).fetchone()[0]
    with Timed() as timed:
        for i in range(writes):
            new = f"pool_{i}"
            with pool.connection() as conn:
                cursor = conn.execute(PG_CAS, (str(i), new, KEY, version))
            assert cursor.rowcount == 1
            version = new
    return timed.per_write(writes)


def pg_cas_us(conn: Any, writes: int) -> tuple[float, float]:
    """The hand-written compare-and-set on PostgreSQL: psycopg's transaction, a conditional UPDATE."""
    version = conn.execute("SELECT version FROM guard_state WHERE key = %s", (KEY,)).fetchone()[0]
    conn.commit()
    with Timed() as timed:
        for i in range(writes):
            new = f"cas_{i}"
            with conn.transaction():
                cursor = conn.execute(PG_CAS, (str(i), new, KEY, version))
            assert cursor.rowcount == 1
            version = new
    return timed.per_write(writes)


def against_floor(target: str, floor: Any, writes: int, rounds: int, extras: dict[str, Any] | None = None,
                  *, limit: float) -> dict[str, Any]:
    """``write_state`` (telemetry off) and the store's floor on one row, alternating rounds; each
    of ``extras`` (another hand-written variant) is timed in the same rounds, reported beside.
    Every side returns (wall, CPU) microseconds per write; the figures are medians of rounds."""
    with closing(open_store(target)) as store:
        state = StateStore(store)
        state.write_state(KEY, 0, ABSENT_VERSION)
        sides = {"guarded": lambda n: guarded_clocks(state, n), "floor": floor, **(extras or {})}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for run in sides.values():
            run(writes // 4)
        for _ in range(rounds):
            for name, run in sides.items():
                times[name].append(run(writes))

    def median(name: str, clock: int) -> float:
        return statistics.median(t[clock] for t in times[name])

    g, f = median("guarded", 0), median("floor", 0)
    result = {"guarded_us": round(g, 2), "floor_us": round(f, 2), "ratio": round(g / f, 2),
              "target": limit, "target_met": g / f <= limit}
    cg, cf = median("guarded", 1), median("floor", 1)
    result |= {"cpu_guarded_us": round(cg, 2), "cpu_floor_us": round(cf, 2), "cpu_ratio": round(cg / cf, 2)}
    for name in extras or {}:
        other, cpu_other = median(name, 0), median(name, 1)
        result |= {f"{name}_us": round(other, 2), f"ratio_to_{name}": round(g / other, 2),
                   f"cpu_{name}_us": round(cpu_other, 2), f"cpu_ratio_to_{name}": round(cg / cpu_other, 2)}
    return result


def sqlite_side(path: Path) -> tuple[StateStore, sqlite3.Connection]:
    """A guarded store with one row, and a plain connection to the same file with the store's settings."""
    state = StateStore(SQLiteStore(path))
    state.write_state(KEY, 0, ABSENT_VERSION)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return state, conn


def measure(writes: int, rounds: int, folder: Path) -> dict[str, Any]:
    state, conn = sqlite_side(folder / "bench.db")
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


def sqlite_floor(folder: Path, writes: int, rounds: int) -> dict[str, Any]:
    path = folder / "floor.db"
    _, conn = sqlite_side(path)
    try:
        result = against_floor(str(path), lambda n: sqlite_cas_us(conn, n, log=True), writes, rounds,
                               {"plain_cas": lambda n: sqlite_cas_us(conn, n)}, limit=TARGET_FLOOR_RATIO["sqlite"])
    finally:
        conn.close()
    return result


def pg_floor(dsn: str, writes: int, rounds: int) -> dict[str, Any]:
    """The PostgreSQL floor is what a psycopg user writes with a pool of the store's default size;
    the same transaction on a connection of its own (no pool) is timed beside it."""
    import psycopg
    from psycopg_pool import ConnectionPool

    with closing(open_store(dsn)) as store:
        StateStore(store).write_state(KEY, 0, ABSENT_VERSION)
        size = store.max_connections  # type: ignore[attr-defined]
    with psycopg.connect(dsn) as conn, ConnectionPool(dsn, min_size=1, max_size=size, open=True) as pool:
        return against_floor(dsn, lambda n: pg_pooled_cas_us(pool, n), writes, rounds,
                             {"floor_dedicated_connection": lambda n: pg_cas_us(conn, n)},
                             limit=TARGET_FLOOR_RATIO["postgresql"])


def postgres(ns: argparse.Namespace) -> tuple[str | None, Any]:
    """The DSN to benchmark on, and the server to stop afterwards (None when not ours)."""
    if ns.pg_dsn:
        return ns.pg_dsn, None
    import pg_server

    try:
        server = pg_server.start_server(fsync="on", synchronous_commit="off", full_page_writes="on")
    except pg_server.NoPostgres as exc:
        print(f"PostgreSQL rows skipped: {exc}")
        return None, None
    return server.dsn, server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=5_000, help="writes per round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds per side (default %(default)s)")
    parser.add_argument("--increments", type=int, default=100, help="accepted writes per contention thread (default %(default)s)")
    parser.add_argument("--pg-dsn", help="benchmark PostgreSQL on this server instead of starting one")
    parser.add_argument("--out", type=Path, default=Path("bench-output/guards.json"))
    ns = parser.parse_args(argv)
    result: dict[str, Any] = {"load_average_1m_at_start": round(os.getloadavg()[0], 2)}
    dsn, server = postgres(ns)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-guards-") as name:
            folder = Path(name)
            result["sqlite_instrumented"] = measure(ns.writes, ns.rounds, folder)
            result["floor"] = {"sqlite": sqlite_floor(folder, ns.writes, ns.rounds)}
            if dsn:
                result["floor"]["postgresql"] = pg_floor(dsn, ns.writes, ns.rounds)
            result["contention"] = {}
            stores = {"sqlite": str(folder / "contention.db"), **({"postgresql": dsn} if dsn else {})}
            for telemetry_on in (False, True):
                for store, target in stores.items():
                    label = f"{store}, telemetry {'on' if telemetry_on else 'off'}"
                    result["contention"][label] = _guards_contention.run(
                        target, folder, processes=PROCESSES, threads=THREADS, increments=ns.increments,
                        hot_keys=HOT_KEYS, telemetry_on=telemetry_on,
                    )
    finally:
        if server is not None:
            server.stop()
    result["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    report(result)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2))
    return 0


def report(result: dict[str, Any]) -> None:
    first = result["sqlite_instrumented"]
    print(f"load average (1 min): {result['load_average_1m_at_start']} at start, {result['load_average_1m_at_end']} at the end")
    print("guarded writes on SQLite (medians, microseconds per write)")
    print(f"  bare UPDATE of the row              : {first['bare_update_us']:8.2f}")
    print(f"  write_state, telemetry off          : {first['guarded_us']:8.2f}  ({first['ratio_guarded_to_bare']:.2f}x)")
    print(f"  write_state, instrumented           : {first['guarded_instrumented_us']:8.2f}  "
          f"({first['ratio_guarded_instrumented_to_bare']:.2f}x, target <= {TARGET_RATIO:g}x: "
          f"{'met' if first['target_met'] else 'NOT met'})")
    print(f"  (an instrumented no-op write tool   : {first['instrumented_noop_us']:8.2f}  "
          f"({first['ratio_instrumented_noop_to_bare']:.2f}x): the span and counters alone)")
    print(f"\nguarded write (telemetry off) vs hand-written code on the same database (target: SQLite <= {TARGET_FLOOR_RATIO['sqlite']:g}x its floor, "
          f"PostgreSQL <= {TARGET_FLOOR_RATIO['postgresql']:g}x)")
    print(f"  {'store':<11} {'hand-written':<44} {'its us':>8} {'guarded us':>11} {'x wall':>7} {'x CPU':>6}")
    names = {"sqlite": ("compare-and-set + change-log row (the floor)", "plain_cas", "compare-and-set alone"),
             "postgresql": ("pooled compare-and-set (the floor)", "floor_dedicated_connection",
                            "compare-and-set, dedicated connection")}
    for store, row in result["floor"].items():
        floor_name, extra, extra_name = names[store]
        met = "met" if row["target_met"] else "NOT met"
        cpu = "" if store != "sqlite" else f"{row['cpu_ratio']:6.2f}"
        print(f"  {store:<11} {floor_name:<44} {row['floor_us']:8.2f} {row['guarded_us']:11.2f} {row['ratio']:7.2f} {cpu:>6}  {met}")
        if f"{extra}_us" in row:
            cpu = "" if store != "sqlite" else f"{row[f'cpu_ratio_to_{extra}']:6.2f}"
            print(f"  {'':<11} {extra_name:<44} {row[f'{extra}_us']:8.2f} {row['guarded_us']:11.2f} "
                  f"{row[f'ratio_to_{extra}']:7.2f} {cpu:>6}")
    print(f"\ncontention: {PROCESSES} processes x {THREADS} threads on {HOT_KEYS} hot keys")
    for label, row in result["contention"].items():
        print(f"  {label:<28}: {row['accepted_per_second']:6d} accepted/s  p50 {row['p50_ms']:7.2f} ms  "
              f"p99 {row['p99_ms']:7.2f} ms  max {row['max_ms']:7.1f} ms  "
              f"({row['stale_refusals']} stale, {row['other_refusals']} other, {row['lost_updates']} lost)")


if __name__ == "__main__":
    sys.exit(main())

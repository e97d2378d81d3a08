"""The 4 x 8 contention run of ``bench_guards.py``: processes of threads doing read-modify-write
increments on a few hot keys through ``StateStore``, on one store, timing every ``write_state``.

Each worker process opens its own store (``open_store``), optionally configures telemetry with
an exporter that discards, waits on a shared start event, and writes its latencies (µs, accepted
and refused writes alike) and counts to a JSON file, so the parent never blocks on a pipe.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

JOIN_SECONDS = 600


def worker(target: str, keys: list[str], threads: int, increments: int, telemetry_on: bool, out: str, start: Any) -> None:
    """``threads`` threads each add 1 to a random hot key ``increments`` times, re-reading on a stale refusal."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    import telemetry
    from telemetry.guards import StateStore, open_store

    class Discard(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    runtime = None
    if telemetry_on:
        runtime = telemetry.configure(service_name="bench", traces_dir=None, extra_exporters=[Discard()], install_global=False)
    state = StateStore(open_store(target))
    latencies: list[float] = []
    counts = {"accepted": 0, "stale": 0, "other": 0}
    lock = threading.Lock()

    def loop(seed: int) -> None:
        rng = random.Random(seed)
        mine: list[float] = []
        done = stale = other = 0
        while done < increments and other < 1000:
            key = rng.choice(keys)
            read = state.read_state(key)
            began = time.perf_counter()
            result = state.write_state(key, read["value"] + 1, read["version"])
            mine.append((time.perf_counter() - began) * 1e6)
            if result["ok"]:
                done += 1
            elif result["error"] == "rejected_stale_version":
                stale += 1
            else:
                other += 1
        with lock:
            latencies.extend(mine)
            counts["accepted"] += done
            counts["stale"] += stale
            counts["other"] += other

    start.wait(JOIN_SECONDS)
    began = time.perf_counter()
    pool = [threading.Thread(target=loop, args=(hash((out, i)),)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - began
    if runtime is not None:
        runtime.shutdown()
    state.store.close()
    Path(out).write_text(json.dumps({"latencies": latencies, "wall": wall, **counts}))


def run(target: str, folder: Path, *, processes: int, threads: int, increments: int, hot_keys: int,
        telemetry_on: bool) -> dict[str, Any]:
    """One contention run on ``target``; figures over every process's writes."""
    from telemetry.guards import ABSENT_VERSION, StateStore, open_store

    state = StateStore(open_store(target))
    prefix = f"hot/{time.time_ns()}/"
    keys = [f"{prefix}{i}" for i in range(hot_keys)]
    for key in keys:
        state.write_state(key, 0, ABSENT_VERSION)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    outs = [folder / f"contention-{i}.json" for i in range(processes)]
    procs = [ctx.Process(target=worker, args=(target, keys, threads, increments, telemetry_on, str(o), start)) for o in outs]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every process import and connect before the race starts
    start.set()
    for p in procs:
        p.join(JOIN_SECONDS)
    for p in procs:
        if p.is_alive():
            p.kill()
    if any(p.exitcode != 0 for p in procs):
        sys.exit("a contention worker failed")
    seen = [json.loads(o.read_text()) for o in outs]
    latencies = sorted(x for s in seen for x in s["latencies"])
    accepted = sum(s["accepted"] for s in seen)
    total = sum(state.read_state(k)["value"] for k in keys)
    state.store.close()
    if total != accepted:
        sys.exit(f"lost updates: {accepted} accepted, {total} applied")
    return {
        "accepted_writes": accepted,
        "stale_refusals": sum(s["stale"] for s in seen),
        "other_refusals": sum(s["other"] for s in seen),
        "accepted_per_second": round(accepted / max(s["wall"] for s in seen)),
        "p50_ms": round(statistics.median(latencies) / 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] / 1000, 2),
        "max_ms": round(latencies[-1] / 1000, 1),
        "lost_updates": accepted - total,
    }

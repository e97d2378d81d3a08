"""Real processes on one database (a SQLite file, a PostgreSQL server): compare-and-set under contention, idempotency under replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telemetry.guards import StateStore, open_store

import worker_processes
from . import guard_workers

PROCESSES, THREADS, INCREMENTS = 4, 8, 10
JOIN_SECONDS = 120


def _run(target: object, arg_sets: list[tuple[object, ...]]) -> None:
    ctx = worker_processes.context(guard_workers)
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(*args, start)) for args in arg_sets]  # type: ignore[arg-type]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(JOIN_SECONDS)
    for p in procs:
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in procs] == [0] * len(procs), "a worker process failed or hung"


@pytest.mark.slow
def test_no_lost_update_and_every_rejection_counted(store_url: str, tmp_path: Path) -> None:
    """4 processes x 8 threads of read-modify-write lose no update; rejections seen equal rejections counted."""
    db = store_url
    state = StateStore(open_store(db))
    created = state.write_state(guard_workers.COUNTER_KEY, 0, "absent")
    assert created["ok"]
    outs = [tmp_path / f"out{i}.json" for i in range(PROCESSES)]
    _run(guard_workers.hammer, [(db, THREADS, INCREMENTS, str(out)) for out in outs])
    seen = [json.loads(out.read_text()) for out in outs]
    accepted = sum(s["accepted"] for s in seen)
    assert accepted == PROCESSES * THREADS * INCREMENTS
    assert all(s["unexpected"] == 0 for s in seen)
    final = state.read_state(guard_workers.COUNTER_KEY)["value"]
    assert final == accepted, "an accepted write was lost (or a rejected one applied)"
    for s in seen:
        assert s["counted_rejections"] == s["rejected"]
        assert s["counted_ok"] == s["accepted"]
    assert sum(s["rejected"] for s in seen) > 0, "32 contending writers produced no conflict: the test is not contending"
    with state.store.read() as conn:
        logged = conn.execute("SELECT count(*) FROM guard_changes WHERE key = ?", (guard_workers.COUNTER_KEY,)).fetchone()[0]
    assert logged == accepted + 1  # every accepted write (and the create) is in the change log


@pytest.mark.slow
def test_concurrent_replays_run_the_write_once(store_url: str, tmp_path: Path) -> None:
    """Four processes sending one idempotency key at once: the charge runs once, everyone gets its result."""
    db = store_url
    open_store(db)
    runs = tmp_path / "runs.log"
    outs = [tmp_path / f"out{i}.json" for i in range(4)]
    _run(guard_workers.replay_charge, [(db, "order-77-charge", str(runs), str(out)) for out in outs])
    assert len(runs.read_text().splitlines()) == 1, "the non-idempotent write ran more than once"
    reports = [json.loads(out.read_text()) for out in outs]
    finals = [r["answers"][-1] for r in reports]
    assert all(f["ok"] for f in finals)
    assert len({f["charge_id"] for f in finals}) == 1
    assert sorted(bool(f.get("deduplicated")) for f in finals) == [False, True, True, True]
    assert sum(r["replays"] for r in reports) == 3
    waited = sum(len(r["answers"]) - 1 for r in reports)
    assert sum(r["in_progress_counted"] for r in reports) == waited  # every in_progress answer was counted

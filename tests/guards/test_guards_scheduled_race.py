"""Two firing workers and a canceller racing on one store (SQLite, then PostgreSQL): every due send
is delivered exactly once or cancelled, never both, and the store says which."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import worker_processes
from . import scheduled_workers
from .scheduled_workers import cancel_some, crew, fire_until_done, send_tool

SENDS = 60
WORKERS = 2
JOIN_SECONDS = 120


@pytest.mark.slow
def test_each_due_send_fires_once_across_processes_or_is_cancelled(store_url: str, tmp_path: Path) -> None:
    """60 sends, 2 firing processes, 1 cancelling process: deliveries == fired rows, none twice, none cancelled."""
    objectives, sends = crew(store_url)
    version = objectives.publish_objective(scheduled_workers.POLICY, "Notices go to opted-in users")["version"]
    deliveries = tmp_path / "deliveries.txt"
    tool = send_tool(sends, str(deliveries))
    ids = [tool(f"notice-{n}", version)["scheduled_id"] for n in range(SENDS)]
    assert len(set(ids)) == SENDS
    ctx = worker_processes.context(scheduled_workers)
    start = ctx.Barrier(WORKERS + 2, timeout=JOIN_SECONDS)
    meet = ctx.Barrier(WORKERS, timeout=JOIN_SECONDS)
    logs = {f"w{n}": tmp_path / f"w{n}.json" for n in range(WORKERS)}
    procs = [ctx.Process(target=fire_until_done, args=(store_url, str(deliveries), str(path), start, name, meet))
             for name, path in logs.items()]
    procs.append(ctx.Process(target=cancel_some, args=(store_url, ids, str(tmp_path / "cancel.json"), start, 3)))
    for proc in procs:
        proc.start()
    start.wait(JOIN_SECONDS)
    try:
        for proc in procs:
            proc.join(JOIN_SECONDS)
    finally:
        alive = [p for p in procs if p.is_alive()]
        for proc in alive:
            proc.terminate()
            proc.join(5)
    assert not alive and [p.exitcode for p in procs] == [0] * len(procs)

    delivered = Counter(line.split()[0] for line in deliveries.read_text().splitlines())
    assert max(delivered.values()) == 1, [n for n, k in delivered.items() if k > 1]
    fired = {name: json.loads(path.read_text()) for name, path in logs.items()}
    fired_ids = [r["scheduled_id"] for batch in fired.values() for r in batch]
    assert len(fired_ids) == len(set(fired_ids)), "a send was fired by two workers"
    assert all(r["status"] == "fired" for batch in fired.values() for r in batch)
    cancels = json.loads((tmp_path / "cancel.json").read_text())
    cancelled = {a["scheduled_id"] for a in cancels if a["ok"]}
    assert not cancelled & set(fired_ids), "a send was both cancelled and fired"
    assert cancelled | set(fired_ids) == set(ids)
    with sends.store.read() as conn:
        status = dict(conn.execute("SELECT scheduled_id, status FROM guard_scheduled_sends").fetchall())
    assert Counter(status.values()) == Counter({"fired": len(fired_ids), "cancelled": len(cancelled)})
    assert sum(delivered.values()) == len(fired_ids)
    refused_cancels = [a for a in cancels if not a["ok"]]
    assert {a["status"] for a in refused_cancels} <= {"fired", "firing"}  # claimed first: too late to cancel
    assert sum(1 for batch in fired.values() if batch) == WORKERS, "one worker fired everything: no race was run"

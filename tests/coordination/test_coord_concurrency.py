"""Supersession racing reads and sends across processes on one database (SQLite, then PostgreSQL): no send is accepted
against a version that was superseded before its check, and every refusal is counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.guards import Objectives, open_store

import worker_processes
from . import coord_workers
from .coord_workers import POLICY, read_and_send, supersede_many

SENDERS = 3
SENDS_EACH = 30
SUPERSESSIONS = 12
JOIN_SECONDS = 90


@pytest.mark.slow
def test_no_send_is_accepted_against_a_version_superseded_before_its_check(store_url: str, tmp_path: Path) -> None:
    """Across 4 processes, accepted sends of each version all precede that version's supersession."""
    db = store_url
    objectives = Objectives(open_store(db))
    first = objectives.publish_objective(POLICY, "Credit up to $31")["version"]
    ctx = worker_processes.context(coord_workers)
    done, start = ctx.Event(), ctx.Barrier(SENDERS + 1, timeout=JOIN_SECONDS)
    logs = {"superseder": tmp_path / "superseder.json"}
    procs = [
        ctx.Process(target=supersede_many, args=(db, SUPERSESSIONS, str(logs["superseder"]), done, start, 7))
    ]
    for n in range(SENDERS):
        name = f"agent-{n}"
        logs[name] = tmp_path / f"{name}.json"
        procs.append(ctx.Process(target=read_and_send, args=(db, name, SENDS_EACH, first, str(logs[name]), done, start, n)))
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(JOIN_SECONDS)
    finally:
        alive = [p for p in procs if p.is_alive()]
        for proc in alive:
            proc.terminate()
            proc.join(5)
    assert not alive, f"{len(alive)} worker(s) did not finish within {JOIN_SECONDS} s"
    assert [p.exitcode for p in procs] == [0] * len(procs)

    supersessions: list[dict[str, Any]] = json.loads(logs["superseder"].read_text())
    assert len(supersessions) == SUPERSESSIONS and supersessions[0]["old"] == first
    senders = {name: json.loads(path.read_text()) for name, path in logs.items() if name != "superseder"}
    superseded_at = {s["old"]: s["returned"] for s in supersessions}

    late_accepts = [
        (name, send)
        for name, log in senders.items()
        for send in log["sends"]
        if send["ok"] and send["version"] in superseded_at and send["called"] > superseded_at[send["version"]]
    ]
    assert late_accepts == [], "sends accepted against a version superseded before they were called"

    # No acceptance of a version was recorded after its supersession committed.
    log = objectives.sends(POLICY)
    accepted_by_version: dict[str, int] = {}
    for row in log:
        if row["accepted"]:
            accepted_by_version[row["version"]] = accepted_by_version.get(row["version"], 0) + 1
    for s in supersessions:
        assert accepted_by_version.get(s["old"], 0) == s["accepted"], s
    assert all(row["accepted"] == (row["version"] == row["current_version"]) for row in log)

    total_ok = sum(send["ok"] for entry in senders.values() for send in entry["sends"])
    assert total_ok == sum(accepted_by_version.values()) and total_ok > 0
    in_race = [send for entry in senders.values() for send in entry["sends"][:-1]]
    assert any(not send["ok"] for send in in_race), "no send raced a supersession; the test proved nothing"
    for name, entry in senders.items():
        stale = sum(send["error"] == c.OUTCOME_STALE_POLICY for send in entry["sends"])
        assert entry["sends"][-1]["error"] == c.OUTCOME_STALE_POLICY, f"{name}'s late send used a superseded version"
        assert entry["stale_counted"] == stale, name
        assert all(send["ok"] or send["error"] == c.OUTCOME_STALE_POLICY for send in entry["sends"]), name

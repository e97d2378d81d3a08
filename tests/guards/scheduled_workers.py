"""Processes for the cross-process firing test: several firing workers and a canceller on one store.

Every process defines the send tool the same way (:func:`send_tool`), so its scope is the same
everywhere, and registers it. The body appends one line per delivery to a shared file (an
``O_APPEND`` write of one short line is atomic), so the parent counts real deliveries, not
what the store says.
"""

from __future__ import annotations

import json
import os
import random
import threading
from typing import Any

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.guards import Objectives, ScheduledSends, open_store
from telemetry.testing import capture

POLICY = "broadcast-policy"
WAIT_SECONDS = 60.0

# Set in a firing worker: its first delivery waits here until every firing worker is delivering,
# so the workers are inside ``fire_due`` at the same time however the machine schedules them.
_rendezvous: Any = None


def crew(db: str) -> tuple[Objectives, ScheduledSends]:
    store = open_store(db)
    objectives = Objectives(store)
    return objectives, ScheduledSends(store, objectives)


def send_tool(sends: ScheduledSends, deliveries: str) -> Any:
    @instrument_tool(kind=c.KIND_SEND)
    @sends.schedule_send(policy_task_id=POLICY, review_seconds=0)
    def send_notice(notice: str, policy_version: str) -> dict[str, Any]:
        """Deliver one notice (here: one line in the deliveries file)."""
        _meet_the_other_workers()
        fd = os.open(deliveries, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{notice} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return {"ok": True, "notice": notice}

    return sends.register(send_notice)


def _meet_the_other_workers() -> None:
    global _rendezvous
    waiting, _rendezvous = _rendezvous, None
    if waiting is not None:
        try:
            waiting.wait(WAIT_SECONDS)
        except threading.BrokenBarrierError:
            pass  # the parent's assertion that every worker fired says what went wrong


def fire_until_done(db: str, deliveries: str, log_path: str, start: Any, name: str, meet: Any = None) -> None:
    """Fire due sends until none is left open; log what this worker fired.

    ``meet`` (a barrier for the firing workers) holds this worker's first delivery until the
    others are delivering too: without it a fast worker can fire all sends before a slow one starts.
    """
    global _rendezvous
    _rendezvous = meet
    _, sends = crew(db)
    send_tool(sends, deliveries)
    fired: list[dict[str, Any]] = []
    with capture():
        start.wait(WAIT_SECONDS)
        while True:
            batch = sends.fire_due(limit=5, worker=name)
            fired.extend(batch)
            with sends.store.read() as conn:
                left = conn.execute("SELECT count(*) FROM guard_scheduled_sends WHERE status IN ('scheduled', "
                                    "'approved')").fetchone()[0]
            if not left and not batch:
                break
    with open(log_path, "w") as fh:
        json.dump(fired, fh)


def cancel_some(db: str, ids: list[str], log_path: str, start: Any, seed: int) -> None:
    """Cancel a random half of ``ids`` while the workers fire; log each answer."""
    rng = random.Random(seed)
    _, sends = crew(db)
    answers = []
    with capture():
        start.wait(WAIT_SECONDS)
        for sid in rng.sample(ids, len(ids) // 2):
            got = sends.cancel_scheduled_send(sid, "a reviewer said no", "reviewer")
            answers.append({"scheduled_id": sid, "ok": got["ok"], "status": got.get("status")})
    with open(log_path, "w") as fh:
        json.dump(answers, fh)

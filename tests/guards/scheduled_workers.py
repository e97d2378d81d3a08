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
from typing import Any

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.guards import Objectives, ScheduledSends, open_store
from telemetry.testing import capture

POLICY = "broadcast-policy"
WAIT_SECONDS = 60.0


def crew(db: str) -> tuple[Objectives, ScheduledSends]:
    store = open_store(db)
    objectives = Objectives(store)
    return objectives, ScheduledSends(store, objectives)


def send_tool(sends: ScheduledSends, deliveries: str) -> Any:
    @instrument_tool(kind=c.KIND_SEND)
    @sends.schedule_send(policy_task_id=POLICY, review_seconds=0)
    def send_notice(notice: str, policy_version: str) -> dict[str, Any]:
        """Deliver one notice (here: one line in the deliveries file)."""
        fd = os.open(deliveries, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{notice} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return {"ok": True, "notice": notice}

    return sends.register(send_notice)


def fire_until_done(db: str, deliveries: str, log_path: str, start: Any, name: str) -> None:
    """Fire due sends until none is left open; log what this worker fired."""
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

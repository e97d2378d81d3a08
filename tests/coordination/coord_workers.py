"""Processes for the cross-process supersession test: one superseder, several read-and-send agents.

Each worker opens its own store (``open_store``) on the shared database and writes what it saw as JSON to
its own log file (so the parent never blocks on a pipe). Times are ``time.monotonic_ns()``,
one clock for every process on the machine.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from telemetry import agent, instrument_tool
from telemetry import conventions as c
from telemetry.guards import Objectives, guarded_send, open_store
from telemetry.testing import capture

POLICY = "refund-policy"
WAIT_SECONDS = 60.0


def supersede_many(db: str, count: int, log_path: str, done: Any, start: Any, seed: int) -> None:
    """Supersede the policy ``count`` times; after each, note how many sends its old version had.

    ``start`` is a barrier every worker reaches once set up, so the race really is a race.
    """
    rng = random.Random(seed)
    objectives = Objectives(open_store(db))
    start.wait(WAIT_SECONDS)
    entries = []
    try:
        for i in range(count):
            time.sleep(rng.uniform(0.002, 0.01))
            current = objectives.get_objective(POLICY, "superseder")["version"]
            result = objectives.supersede_objective(POLICY, f"Credit up to ${30 - i}", f"review {i}", current)
            returned = time.monotonic_ns()
            with objectives.store.read() as conn:
                accepted = conn.execute(
                    "SELECT count(*) FROM objective_sends WHERE task_id = ? AND version = ? AND accepted = 1",
                    (POLICY, result["previous_version"]),
                ).fetchone()[0]
            entries.append(
                {"old": result["previous_version"], "new": result["version"], "returned": returned, "accepted": accepted}
            )
    finally:
        done.set()
        with open(log_path, "w") as fh:
            json.dump(entries, fh)


def read_and_send(
    db: str, agent_id: str, count: int, stale_version: str, log_path: str, done: Any, start: Any, seed: int
) -> None:
    """Read the policy and send against it ``count`` times; once supersession is done, send with
    ``stale_version`` (the first published one), which must be refused."""
    rng = random.Random(seed)
    objectives = Objectives(open_store(db))

    @instrument_tool(kind="send")
    @guarded_send(objectives, policy_task_id=POLICY)
    def send_customer_message(ticket_id: str, body: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True, "ticket_id": ticket_id}

    sends: list[dict[str, Any]] = []
    with capture() as cap, agent(agent_id):
        start.wait(WAIT_SECONDS)
        for i in range(count):
            held = objectives.get_objective(POLICY, agent_id)["version"]
            time.sleep(rng.uniform(0.0, 0.004))  # drafting, while the policy may change
            called = time.monotonic_ns()
            result = send_customer_message(f"{agent_id}-{i}", "draft", held)
            sends.append({"version": held, "called": called, "ok": result["ok"], "error": result.get("error")})
        done.wait(WAIT_SECONDS)
        called = time.monotonic_ns()
        result = send_customer_message(f"{agent_id}-late", "late draft", stale_version)
        sends.append({"version": stale_version, "called": called, "ok": result["ok"], "error": result.get("error")})
        counted = cap.sample(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "send_customer_message"}) or 0.0
    with open(log_path, "w") as fh:
        json.dump({"sends": sends, "stale_counted": counted}, fh)

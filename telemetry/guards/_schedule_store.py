"""The scheduled sends' table and every statement on it, kept apart from the guard's flow.

Each change of a send's status is one conditional statement inside a write transaction
(``UPDATE ... WHERE scheduled_id = ? AND status IN (...)``), so the store's write lock orders
a claim, a cancel and an approval of the same send across processes and hosts: whichever
commits first wins, and the others see the status it left.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Final

from .. import conventions as c
from ..instrument import Call
from ._envelope import refusal, success
from ._store import Store

__all__ = [
    "APPROVED", "CANCELLED", "DDL", "FAILED", "FIRED", "FIRING", "OPEN", "REFUSED", "SCHEDULED", "SCHEMA_NAME",
    "UNRESOLVED", "claim", "due", "finish", "insert", "iso", "policy_refusal", "public", "review", "status_of",
]

SCHEMA_NAME: Final = "guards.scheduled_sends"
DDL: Final = """
CREATE TABLE IF NOT EXISTS guard_scheduled_sends (
    scheduled_id    TEXT PRIMARY KEY,
    scope           TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    policy_task_id  TEXT NOT NULL,
    policy_version  TEXT NOT NULL,
    agent_id        TEXT,
    conversation_id TEXT,
    window_seconds  REAL NOT NULL,
    scheduled_at    REAL NOT NULL,
    fires_at        REAL NOT NULL,
    status          TEXT NOT NULL,
    reviewed_by     TEXT,
    reviewed_at     REAL,
    reason          TEXT,
    claimed_by      TEXT,
    claimed_at      REAL,
    outcome         TEXT,
    result          TEXT,
    finished_at     REAL
);
CREATE INDEX IF NOT EXISTS guard_scheduled_sends_due ON guard_scheduled_sends(status, fires_at);
"""

SCHEDULED, APPROVED, FIRING, FIRED, REFUSED, CANCELLED, FAILED = (
    "scheduled", "approved", "firing", "fired", "refused", "cancelled", "failed")
UNRESOLVED: Final = "unresolved"
"""Not a stored status: what ``fire_due`` reports for a send whose tool this process cannot reach."""
OPEN: Final = (SCHEDULED, APPROVED)
"""The statuses a send can still be cancelled, approved or fired from."""

_POLICY = ("SELECT seq, version, text, published_at FROM objective_versions WHERE task_id = ? "
           "ORDER BY seq DESC LIMIT 1")


def iso(epoch: float) -> str:
    """``epoch`` seconds as ISO 8601 UTC with a ``Z`` (what envelopes and spans carry)."""
    try:
        return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return f"{epoch:.3f} s since the epoch"


def policy_refusal(conn: Any, task_id: str, version: str, call: Call) -> dict[str, Any] | None:
    """The refusal for scheduling against ``version`` of ``task_id``'s policy, or None when it is current.

    The same answers a guarded send gives (``not_found``, ``stale_policy``, ``invalid_argument``),
    without recording a send verdict: nothing is sent at schedule time.
    """
    row = conn.execute(_POLICY, (task_id,)).fetchone()
    if row is None:
        return refusal(c.OUTCOME_NOT_FOUND, f"no policy is published for task {task_id!r}; publish it with "
                       f"publish_objective before scheduling sends under it", retry=False, task_id=task_id)
    call.set_attribute(c.POLICY_CURRENT_VERSION, row["version"])
    if row["version"] == version:
        return None
    fields = {"task_id": task_id, "current_version": row["version"], "current_policy": row["text"],
              "as_of": row["published_at"]}
    known = conn.execute("SELECT superseded_at FROM objective_versions WHERE task_id = ? AND version = ?",
                         (task_id, version)).fetchone()
    if known is None:
        return refusal(c.OUTCOME_INVALID_ARGUMENT, f"policy_version {version!r} was never a version of {task_id!r}; "
                       f"pass the version get_objective returned (current: {row['version']!r})", retry=True, **fields)
    return refusal(c.OUTCOME_STALE_POLICY, f"policy {task_id!r} version {version!r} was superseded at "
                   f"{known['superseded_at']}; nothing was scheduled. Re-read it with get_objective, redraft against "
                   f"version {row['version']!r}, and schedule again", retry=True, **fields)


def insert(conn: Any, *, scheduled_id: str, scope: str, tool: str, arguments: str, policy_task_id: str,
           policy_version: str, agent_id: str | None, conversation_id: str | None, window: float,
           scheduled_at: float, fires_at: float) -> None:
    conn.execute(
        "INSERT INTO guard_scheduled_sends (scheduled_id, scope, tool, arguments, policy_task_id, policy_version, "
        "agent_id, conversation_id, window_seconds, scheduled_at, fires_at, status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (scheduled_id, scope, tool, arguments, policy_task_id, policy_version, agent_id, conversation_id, window,
         scheduled_at, fires_at, SCHEDULED),
    )


def due(store: Store, now: float, limit: int) -> list[tuple[str, str]]:
    """``(scheduled_id, scope)`` of the open sends whose fire time has come, oldest first."""
    with store.read() as conn:
        found = conn.execute(
            "SELECT scheduled_id, scope FROM guard_scheduled_sends WHERE status IN (?, ?) AND fires_at <= ? "
            "ORDER BY fires_at, scheduled_id LIMIT ?",
            (*OPEN, now, limit),
        ).fetchall()
    return [(r["scheduled_id"], r["scope"]) for r in found]


def claim(store: Store, scheduled_id: str, now: float, worker: str | None) -> dict[str, Any] | None:
    """Take a due send for firing (status ``firing``), or None when another worker or a cancel was first."""
    with store.transaction() as conn:
        taken = conn.execute(
            "UPDATE guard_scheduled_sends SET status = ?, claimed_by = ?, claimed_at = ? "
            "WHERE scheduled_id = ? AND status IN (?, ?) AND fires_at <= ?",
            (FIRING, worker, now, scheduled_id, *OPEN, now),
        ).rowcount
        if taken != 1:
            return None
        row = conn.execute("SELECT * FROM guard_scheduled_sends WHERE scheduled_id = ?", (scheduled_id,)).fetchone()
    return {key: row[key] for key in row.keys()}


def finish(store: Store, scheduled_id: str, status: str, outcome: str | None, result: str | None, now: float) -> None:
    """Record how a claimed send ended; ``scheduled`` puts it back for a later pass (nothing was sent)."""
    with store.transaction() as conn:
        if status == SCHEDULED:
            conn.execute("UPDATE guard_scheduled_sends SET status = ?, claimed_by = NULL, claimed_at = NULL "
                         "WHERE scheduled_id = ? AND status = ?", (SCHEDULED, scheduled_id, FIRING))
            return
        conn.execute("UPDATE guard_scheduled_sends SET status = ?, outcome = ?, result = ?, finished_at = ? "
                     "WHERE scheduled_id = ? AND status = ?", (status, outcome, result, now, scheduled_id, FIRING))


def review(conn: Any, row: Any, agent_id: str, reason: str | None, *, cancel: bool, now: float) -> dict[str, Any]:
    """Cancel or approve ``row`` inside the caller's write transaction; the envelope to return."""
    scheduled_id, status = row["scheduled_id"], row["status"]
    if cancel and status == CANCELLED:
        return success(scheduled_id=scheduled_id, status=CANCELLED, already=True, cancelled_by=row["reviewed_by"],
                       message=f"{scheduled_id} was already cancelled; nothing will be sent.")
    if not cancel and status == APPROVED:
        return success(scheduled_id=scheduled_id, status=APPROVED, already=True, fires_at=iso(row["fires_at"]),
                       message=f"{scheduled_id} was already approved; it fires at the next firing pass.")
    if status not in OPEN:
        verb = "cancel" if cancel else "approve"
        return refusal(c.OUTCOME_INVALID_ARGUMENT, f"{scheduled_id} is {status}, so there is nothing to {verb}: "
                       f"read its outcome with get_scheduled_send", retry=False, scheduled_id=scheduled_id, status=status)
    if cancel:
        conn.execute("UPDATE guard_scheduled_sends SET status = ?, reviewed_by = ?, reviewed_at = ?, reason = ? "
                     "WHERE scheduled_id = ? AND status IN (?, ?)", (CANCELLED, agent_id, now, reason, scheduled_id, *OPEN))
        return success(scheduled_id=scheduled_id, status=CANCELLED, cancelled_by=agent_id,
                       message=f"{scheduled_id} is cancelled; nothing will be sent.")
    if row["agent_id"] is not None and row["agent_id"] == agent_id:
        return refusal(c.OUTCOME_INVALID_ARGUMENT, f"{agent_id!r} scheduled {scheduled_id} and cannot approve it too: "
                       f"a review needs someone else; leave it to fire at the end of its window or ask a reviewer",
                       retry=False, scheduled_id=scheduled_id, status=status)
    fires_at = min(float(row["fires_at"]), now)
    conn.execute("UPDATE guard_scheduled_sends SET status = ?, reviewed_by = ?, reviewed_at = ?, fires_at = ? "
                 "WHERE scheduled_id = ? AND status = ?", (APPROVED, agent_id, now, fires_at, scheduled_id, SCHEDULED))
    return success(scheduled_id=scheduled_id, status=APPROVED, approved_by=agent_id, fires_at=iso(fires_at),
                   message=f"{scheduled_id} is approved; it fires at the next firing pass.")


def status_of(store: Store, scheduled_id: str) -> str | None:
    row = store.query_one("SELECT status FROM guard_scheduled_sends WHERE scheduled_id = ?", (scheduled_id,))
    return None if row is None else str(row["status"])


def public(row: Any) -> dict[str, Any]:
    """A stored send as a reviewer reads it (times as ISO 8601, JSON columns parsed)."""
    def when(column: str) -> str | None:
        return None if row[column] is None else iso(float(row[column]))

    return {
        "scheduled_id": row["scheduled_id"], "tool": row["tool"], "status": row["status"],
        "arguments": json.loads(row["arguments"]), "policy_task_id": row["policy_task_id"],
        "policy_version": row["policy_version"], "agent_id": row["agent_id"],
        "review_window_seconds": float(row["window_seconds"]), "scheduled_at": when("scheduled_at"),
        "fires_at": when("fires_at"), "reviewed_by": row["reviewed_by"], "reviewed_at": when("reviewed_at"),
        "reason": row["reason"], "outcome": row["outcome"],
        "result": None if row["result"] is None else json.loads(row["result"]), "finished_at": when("finished_at"),
    }

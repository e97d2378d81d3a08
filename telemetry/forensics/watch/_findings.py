"""Which rows of a question are a finding worth a page, and what identifies each one.

Forensics reports every row, prevented failures included (a refused send, a replay the guard
deduplicated, a stale write it rejected): they are the evidence that a guard worked. The watcher
counts only rows where the wrong outcome went through, so a guarded crew pages nobody. Each
counted row is identified by its question plus the columns below, which stay the same however
many passes see it (counts and times that grow as more spans arrive are left out).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._questions import DOUBLE_EXECUTIONS, question

__all__ = ["Row", "WATCHED", "Watched", "counted", "finding_key", "watched_questions"]

Row = Mapping[str, Any]


def _always(row: Row) -> bool:
    return True


@dataclass(frozen=True)
class Watched:
    """How the watcher treats one question's rows."""

    key: tuple[str, ...]
    """The columns that identify a finding (with the question name)."""
    went_through: Callable[[Row], bool] = _always
    """True for rows that are a failure nobody stopped; other rows are prevented failures."""


WATCHED: dict[str, Watched] = {
    "silent_failures": Watched(("tool_name", "outcome")),
    "lost_updates": Watched(("kind", "run_id", "state_key", "trace_id", "span_id")),
    "constraint_loss_by_hop": Watched(("finding", "run_id", "root_task_id", "constraint_id", "dropped_task_id",
                                       "parent_task_id")),
    "unpersisted_writes": Watched(("run_id", "state_key", "trace_id", "span_id")),
    "stale_sends": Watched(("run_id", "trace_id", "span_id"), lambda r: r.get("verdict") == "sent_stale"),
    "idempotency_conflicts": Watched(("kind", "idempotency_key_hash", "trace_id", "span_id"),
                                     lambda r: r.get("kind") in DOUBLE_EXECUTIONS),
    "divergent_reads": Watched(("run_id", "state_key", "trace_id", "write_span_id"),
                               lambda r: r.get("lost_update") is True),
    "stale_holders": Watched(("run_id", "agent_id", "objective_task_id", "held_version"),
                             lambda r: bool(r.get("accepted_stale_actions"))),
    "plan_violations": Watched(("violation", "run_id", "plan_id", "trace_id", "span_id"),
                               lambda r: r.get("violation") == "changed_outside_target"),
    # Other instrumentations' tool calls as well as ours: a failure the tracer showed green (one
    # finding per format, tool and outcome, like silent_failures), and a call repeated with
    # identical arguments and no key (one per run, tool and arguments; the call count grows).
    "masked_failures": Watched(("span_format", "tool_name", "outcome")),
    "repeated_executions": Watched(("run_id", "tool_name", "arguments_hash")),
}
"""Every question whose rows the watcher counts. Left out: the records (waivers, refusals), and
questions whose every row was told to its caller or refused: ``readback_mismatches`` (the caller
was told the write failed; the live reported-failure alerts cover it) and ``contention`` (a rate
of refusals, which the live rejected-writes alert watches)."""


def watched_questions() -> list[str]:
    """The questions the watcher evaluates, in report order."""
    from .._questions import QUESTION_NAMES

    return [name for name in QUESTION_NAMES if name in WATCHED]


def finding_key(name: str, row: Row) -> str:
    """The identity of one finding of question ``name``: stable text for a set and a state file."""
    watched = WATCHED[name]
    return json.dumps([name, *[_plain(row.get(column)) for column in watched.key]], separators=(",", ":"))


def counted(name: str, rows: list[dict[str, Any]]) -> dict[str, Row]:
    """The rows of ``name`` that went through, by finding key."""
    question(name)  # an unknown name is refused with the valid ones
    watched = WATCHED[name]
    return {finding_key(name, row): row for row in rows if watched.went_through(row)}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)

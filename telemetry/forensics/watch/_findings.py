"""Which rows of a question are a finding worth a page, and what identifies each one.

Forensics reports every row, prevented failures included (a refused send, a replay the guard
deduplicated, a stale write it rejected): they are the evidence that a guard worked. The watcher
counts only rows whose verdict is ``happened`` (the wrong outcome went through), so a guarded
crew pages nobody; ``unknown`` rows (the evidence cannot tell) are left to the report. Each
counted row is identified by its question plus the columns below, which stay the same however
many passes see it (counts and times that grow as more spans arrive are left out).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ... import conventions as c
from .._questions import question

__all__ = ["Row", "WATCHED", "Watched", "counted", "finding_key", "watched_questions"]

Row = Mapping[str, Any]


def _happened(row: Row) -> bool:
    """True for a row whose harm happened (its SQL's verdict), the only rows the watcher counts."""
    return row.get("verdict") == c.VERDICT_HAPPENED


def _always(row: Row) -> bool:
    return True


@dataclass(frozen=True)
class Watched:
    """How the watcher treats one question's rows."""

    key: tuple[str, ...]
    """The columns that identify a finding (with the question name)."""
    went_through: Callable[[Row], bool] = _always
    """Of the happened rows, those worth a page (a question may count fewer than all of them)."""


WATCHED: dict[str, Watched] = {
    "silent_failures": Watched(("tool_name", "outcome")),
    "lost_updates": Watched(("kind", "run_id", "state_key", "trace_id", "span_id")),
    "constraint_loss_by_hop": Watched(("finding", "run_id", "root_task_id", "constraint_id", "dropped_task_id",
                                       "parent_task_id")),
    "unpersisted_writes": Watched(("run_id", "state_key", "trace_id", "span_id")),
    "stale_sends": Watched(("run_id", "trace_id", "span_id")),
    "idempotency_conflicts": Watched(("kind", "idempotency_key_hash", "trace_id", "span_id")),
    # A happened row whose write was current (another agent held the older version) is no lost update.
    "divergent_reads": Watched(("run_id", "state_key", "trace_id", "write_span_id"),
                               lambda r: r.get("lost_update") is True),
    "stale_holders": Watched(("run_id", "agent_id", "objective_task_id", "held_version")),
    "plan_violations": Watched(("violation", "run_id", "plan_id", "trace_id", "span_id")),
    # Other instrumentations' tool calls as well as ours: a failure the tracer showed green (one
    # finding per format, tool and outcome, like silent_failures), and a call repeated with
    # identical arguments and no key (one per run, tool and arguments; the call count grows).
    "masked_failures": Watched(("span_format", "tool_name", "outcome")),
    "repeated_executions": Watched(("run_id", "tool_name", "arguments_hash")),
    # A retry storm: one finding per error that started it (its retries grow the row, not the count).
    c.QUESTION_RETRY_TAX: Watched(("run_id", "agent_id", "tool_name", "trace_id", "span_id")),
}
"""Every question whose happened rows the watcher counts. Left out: the records (waivers, refusals,
scheduled sends),
and questions whose rows the live alerts already page on: ``readback_mismatches`` (its happened
rows are silent failures, counted once under ``silent_failures``) and ``contention`` (every row a
rate of refusals, which the live rejected-writes alert watches)."""


def watched_questions() -> list[str]:
    """The questions the watcher evaluates, in report order."""
    from .._questions import QUESTION_NAMES

    return [name for name in QUESTION_NAMES if name in WATCHED]


def finding_key(name: str, row: Row) -> str:
    """The identity of one finding of question ``name``: stable text for a set and a state file."""
    watched = WATCHED[name]
    return json.dumps([name, *[_plain(row.get(column)) for column in watched.key]], separators=(",", ":"))


def counted(name: str, rows: list[dict[str, Any]]) -> dict[str, Row]:
    """The rows of ``name`` whose verdict is happened, by finding key."""
    question(name)  # an unknown name is refused with the valid ones
    watched = WATCHED[name]
    return {finding_key(name, row): row for row in rows if _happened(row) and watched.went_through(row)}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)

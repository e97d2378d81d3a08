"""The forensics questions: one SQL file each in ``queries/``, registered here with a severity.

A question's one-line description is the first line of its SQL file's header comment
(``-- name: description``), so the SQL stays the single source of what it answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from .. import conventions as c
from ..exceptions import ForensicsInputError
from ..runtime._resources import data_file

__all__ = [
    "CRITICAL",
    "DOUBLE_EXECUTIONS",
    "CONTENT_COLUMNS",
    "INFORMATIONAL",
    "NEEDS",
    "NEXT_STEP",
    "QUESTION_NAMES",
    "RECORD",
    "SEVERITIES",
    "SEVERITY",
    "WARNING",
    "Needs",
    "Question",
    "all_questions",
    "question",
]

QUESTION_NAMES: tuple[str, ...] = (
    "silent_failures",
    "lost_updates",
    "constraint_loss_by_hop",
    "unpersisted_writes",
    "stale_sends",
    "idempotency_conflicts",
    "repeated_executions",
    "masked_failures",
    c.QUESTION_RETRY_TAX,
    "divergent_reads",
    "readback_mismatches",
    "stale_holders",
    "plan_violations",
    "contention",
    "scheduled_sends",
    "waivers_by_hop",
    "guard_refusals",
)
"""Every question, in the order ``report`` shows them: by :data:`SEVERITY`, worst first."""

CRITICAL, WARNING, RECORD = c.SEVERITY_CRITICAL, c.SEVERITY_WARNING, "record"
SEVERITIES: tuple[str, ...] = (CRITICAL, WARNING, RECORD)
"""Worst first. Critical: something went wrong and someone was told it went right. Warning: the
guards or a read-back caught it, or contention is growing. Record: explicit decisions to keep.
The first two are the alert severities (``watch`` labels its findings with them)."""

SEVERITY: dict[str, str] = {
    "silent_failures": CRITICAL,
    "lost_updates": CRITICAL,
    "constraint_loss_by_hop": CRITICAL,
    "stale_sends": CRITICAL,
    "idempotency_conflicts": CRITICAL,
    "unpersisted_writes": CRITICAL,
    "repeated_executions": CRITICAL,
    "masked_failures": WARNING,
    c.QUESTION_RETRY_TAX: WARNING,
    "readback_mismatches": WARNING,
    "divergent_reads": WARNING,
    "plan_violations": WARNING,
    "stale_holders": WARNING,
    "contention": WARNING,
    "waivers_by_hop": RECORD,
    "guard_refusals": RECORD,
    "scheduled_sends": RECORD,
}
"""Each question's severity. Records are reported but never trip ``--fail-on``: a
waiver is a reasoned decision and a refusal a prevented failure whose caller was told."""

DOUBLE_EXECUTIONS: tuple[str, ...] = ("conflict_accepted", "repeated_execution")
"""The ``kind`` values of ``idempotency_conflicts`` rows where a second change went through (no
guard stopped it; see the question's SQL header): what ``watch`` counts and the audit calls a
repeated execution."""

NEXT_STEP: dict[str, str] = {
    "silent_failures": "Open the example traces and fix the tool or its check; its callers were told done.",
    "lost_updates": "Re-apply the overwritten change and make the writer pass expected_version.",
    "constraint_loss_by_hop": "Re-issue the task with the lost constraint; make that hop carry or waive it.",
    "stale_sends": "Tell the recipients the correction; make the sender re-read the current policy.",
    "idempotency_conflicts": "Refund or undo the repeated executions; give retries the same request id.",
    "unpersisted_writes": "Re-send the write and move its read-back to the source of truth, not a cache.",
    "repeated_executions": "Check what each repeated call did and undo the extras; give the tool an idempotency key.",
    "masked_failures": "Open the example traces: the agent was told, your tracer shows green; mark such spans as errors.",
    c.QUESTION_RETRY_TAX: "Make the agent honour retry_after_seconds (and retry: false); give the tool's rate limits a retry-after.",
    "readback_mismatches": "Check the store the read-back reads; the caller was told, so look for retries.",
    "divergent_reads": "Check the rows with lost_update true first; the refused ones were prevented.",
    "plan_violations": "Fix the plan's transform or index before anyone re-commits it.",
    "stale_holders": "Send the current objective to each listed agent and check what they did since.",
    "contention": "Split the hot keys or serialise their writers; agents are racing on them.",
    "waivers_by_hop": "Confirm each waiver's reason with the task's owner.",
    "guard_refusals": "Read the rows with recovered false: those agents gave up or went around the guard.",
    "scheduled_sends": "Give the happened rows' tools a review window; tell the agents of refused sends to redraft.",
}
"""One line of what to do next, shown under each question with rows."""

INFORMATIONAL: frozenset[str] = frozenset(name for name, level in SEVERITY.items() if level == RECORD)
"""Questions whose rows are a record, not a problem (see :data:`SEVERITY`)."""


@dataclass(frozen=True)
class Needs:
    """What a tool span must carry for a question to judge it: every ``spans`` column of
    ``all_of`` set and, when given, one of ``any_of``. Set means not NULL and, for ``readback``,
    not ``unknown`` (what other instrumentations' spans get: nothing read the state back)."""

    all_of: tuple[str, ...]
    any_of: tuple[str, ...] = ()
    what: str = ""
    """What those columns are, for the reader ("state keys with versions (state.key, state.version.*)")."""

    def predicate(self) -> str:
        """The SQL condition over ``spans`` (column names from this table only, never user input)."""
        def is_set(column: str) -> str:
            if column == "readback":
                return "(readback IS NOT NULL AND readback <> 'unknown')"
            return f"{column} IS NOT NULL"
        parts = [is_set(column) for column in self.all_of]
        if self.any_of:
            parts.append("(" + " OR ".join(is_set(column) for column in self.any_of) + ")")
        return " AND ".join(parts)


_VERSIONS = Needs(("state_key",), ("state_version_read", "state_version_expected", "state_version_written"),
                  "state keys with versions (state.key, state.version.*)")
_READBACK = Needs(("readback",), what="a read-back (tool.readback other than unknown)")
_HOPS = Needs(("delegation_task_id",), what="delegation hops (delegation.*)")
NEEDS: dict[str, Needs] = {
    "silent_failures": Needs(("readback", "outcome"), what="an outcome decided after the result, by a read-back "
                             "or the tool (tool.readback, tool.outcome)"),
    "lost_updates": _VERSIONS,
    "constraint_loss_by_hop": _HOPS,
    "unpersisted_writes": _VERSIONS,
    "stale_sends": Needs(("policy_version",), what="the policy version a send used (policy.version)"),
    "idempotency_conflicts": Needs(("idempotency_key_hash",), what="idempotency keys (idempotency.key_hash)"),
    "repeated_executions": Needs(("arguments_hash",), what="recorded arguments (content capture on)"),
    "masked_failures": Needs(("outcome",), what="an outcome: a recorded result, or the decorator's tool.outcome"),
    c.QUESTION_RETRY_TAX: Needs(("outcome",), what="an outcome (tool.outcome, or a recorded result); retry advice "
                       "(tool.error.*) sharpens it"),
    "divergent_reads": _VERSIONS,
    "readback_mismatches": _READBACK,
    "stale_holders": Needs(("objective_task_id", "objective_version"),
                           what="the objective versions agents held (objective.*)"),
    "plan_violations": Needs(("plan_id",), what="plans (plan.id)"),
    "contention": Needs(("state_key", "outcome"), what="state keys with outcomes (state.key, tool.outcome)"),
    "waivers_by_hop": _HOPS,
    "guard_refusals": Needs(("outcome",), what="an outcome (tool.outcome, or a recorded result)"),
    "scheduled_sends": Needs(("schedule_event",), what="scheduled sends (schedule.*)"),
}
"""What each question needs of a tool span (the evidence counts the tool spans having it): a
question no span could give what it needs is reported as not judged, never as "nothing found"."""

CONTENT_COLUMNS: frozenset[str] = frozenset({"example_result", "arguments"})
"""Question columns that carry recorded content (a result, arguments): NULL in the SQL unless
``--show-content``, and left out of every row and report without it."""


@dataclass(frozen=True)
class Question:
    """One question: its name, one-line description, full header comment and SQL."""

    name: str
    description: str
    header: str
    sql: str

    @property
    def severity(self) -> str:
        """``critical``, ``warning`` or ``record`` (see :data:`SEVERITY`)."""
        return SEVERITY[self.name]

    @property
    def next_step(self) -> str:
        """One line of what to do when this question has rows."""
        return NEXT_STEP[self.name]

    @property
    def is_finding(self) -> bool:
        """True when rows of this question are problems (see :data:`INFORMATIONAL`)."""
        return self.name not in INFORMATIONAL


def _header(sql: str) -> list[str]:
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return lines


@cache
def question(name: str) -> Question:
    """Return the registered question ``name``; raise with the valid names when it is unknown."""
    if name not in QUESTION_NAMES:
        raise ForensicsInputError(
            f"unknown forensics question {name!r}; choose one of: {', '.join(QUESTION_NAMES)}"
        )
    sql = data_file("queries", f"{name}.sql").read_text(encoding="utf-8")
    header = _header(sql)
    first = header[0] if header else ""
    prefix = f"{name}:"
    description = first[len(prefix):].strip() if first.startswith(prefix) else first
    return Question(name=name, description=description, header="\n".join(header), sql=sql)


def all_questions() -> list[Question]:
    """Every question in report order: by severity, worst first."""
    return [question(name) for name in QUESTION_NAMES]

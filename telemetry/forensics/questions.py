"""The forensics questions: one SQL file each in ``queries/``, registered here in report order.

A question's one-line description is the first line of its SQL file's header comment
(``-- name: description``), so the SQL stays the single source of what it answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..exceptions import ForensicsInputError
from ..runtime.resources import data_file

QUESTION_NAMES: tuple[str, ...] = (
    "bad_outcome_successes",
    "divergent_reads",
    "lost_updates",
    "constraint_loss_by_hop",
    "waivers_by_hop",
    "readback_mismatches",
    "unpersisted_writes",
    "stale_sends",
    "stale_holders",
    "idempotency_conflicts",
    "plan_violations",
    "contention",
)
"""Every question, in the order ``report`` shows them (the headline first)."""

INFORMATIONAL: frozenset[str] = frozenset({"waivers_by_hop"})
"""Questions whose rows are a record, not a problem: a waiver is an explicit, reasoned decision.
They are reported but do not trip ``--fail-on-findings``."""


@dataclass(frozen=True)
class Question:
    """One question: its name, one-line description, full header comment and SQL."""

    name: str
    description: str
    header: str
    sql: str

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


@lru_cache(maxsize=None)
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
    """Every question in report order."""
    return [question(name) for name in QUESTION_NAMES]

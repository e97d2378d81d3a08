"""Severity, counts and the headline from each forensics row's verdict.

This is the contract the verdict work fills in: every row of :meth:`Forensics.answers` carries
``verdict`` (one of :data:`~telemetry.conventions.VERDICTS`) and ``verdict_basis``; the report
and the HTML page rank and count rows through these three functions, so a prevented row is
never shown as critical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import conventions as c

__all__ = ["headline", "row_severity", "tally"]


def row_severity(question_severity: str, verdict: str) -> str:
    """A row's severity: its question's, except that a prevented row is never critical."""
    if verdict == c.VERDICT_PREVENTED and question_severity == c.SEVERITY_CRITICAL:
        return c.SEVERITY_WARNING
    return question_severity


def tally(answers: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, int]:
    """Rows per verdict over ``answers`` (question name to rows); a row without a known verdict
    counts as unknown."""
    counts = {verdict: 0 for verdict in c.VERDICTS}
    for rows in answers.values():
        for row in rows:
            verdict = row.get("verdict")
            counts[verdict if verdict in counts else c.VERDICT_UNKNOWN] += 1
    return counts


def headline(counts: Mapping[str, int]) -> str:
    """``4 incidents happened; 6 were prevented by guards; 2 could not be judged``."""
    happened = counts.get(c.VERDICT_HAPPENED, 0)
    prevented = counts.get(c.VERDICT_PREVENTED, 0)
    unknown = counts.get(c.VERDICT_UNKNOWN, 0)
    return (f"{happened:,} incident{'' if happened == 1 else 's'} happened; "
            f"{prevented:,} {'was' if prevented == 1 else 'were'} prevented by guards; "
            f"{unknown:,} could not be judged")

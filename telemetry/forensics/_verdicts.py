"""Verdicts: whether the harm a forensics row describes happened, was prevented, or cannot be told.

Every question's SQL decides a ``verdict`` per row (one of :data:`~telemetry.conventions.VERDICTS`)
and says why in ``verdict_basis``. This module turns those into what on-call reads and what gates
act on: a row's severity (a prevented row is never critical), the counts per verdict, and the
headline ("4 incidents happened; 6 were prevented by guards; 2 could not be judged").

The counts are over the finding questions only: the records (waivers, refusals) are decisions
and guard actions, not incidents, and ``guard_refusals`` repeats refusals the finding questions
already count as prevented.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .. import conventions as c
from ._questions import CRITICAL, INFORMATIONAL, RECORD, SEVERITIES, WARNING

__all__ = ["COUNTED", "GATED", "examples_first", "gated", "headline", "row_severity", "tally", "verdict_counts",
           "worst_severity"]

COUNTED: tuple[str, ...] = c.VERDICTS
"""The keys of every :func:`tally`, in the order the headline names them."""
GATED: frozenset[str] = frozenset({c.VERDICT_HAPPENED, c.VERDICT_UNKNOWN})
"""The verdicts ``--fail-on`` counts: what went through, and what nobody can say did not."""
Row = TypeVar("Row", bound=Mapping[str, Any])
_RANK = {c.VERDICT_HAPPENED: 0, c.VERDICT_UNKNOWN: 1, c.VERDICT_PREVENTED: 2}


def _verdict(value: Any) -> str:
    if not isinstance(value, str) or value not in c.VERDICTS:
        raise ValueError(f"verdict {value!r} is not one of {', '.join(c.VERDICTS)}; every forensics row carries "
                         "one in its verdict column (docs/forensics.md, Verdicts)")
    return value


def row_severity(question_severity: str, verdict: str) -> str:
    """The severity of one row: its question's, except that a prevented row is never critical
    (the guard or the read-back caught it and the caller was told: a warning, as the questions'
    own warnings are). Records stay records. Raises ValueError naming a value it does not know."""
    if question_severity not in SEVERITIES:
        raise ValueError(f"severity {question_severity!r} is not one of {', '.join(SEVERITIES)}")
    if _verdict(verdict) == c.VERDICT_PREVENTED and question_severity == CRITICAL:
        return WARNING
    return question_severity


def verdict_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Rows per verdict (all three keys) of one question's rows; a row without a valid verdict is
    refused with ValueError naming it."""
    counts = dict.fromkeys(COUNTED, 0)
    for row in rows:
        counts[_verdict(row.get("verdict"))] += 1
    return counts


def tally(answers: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, int]:
    """Rows per verdict over every finding question of ``answers`` (question name -> rows, as
    :meth:`~telemetry.forensics.Forensics.answers` returns them); records are left out (see the
    module docstring). Always the three keys of :data:`COUNTED`."""
    counts = dict.fromkeys(COUNTED, 0)
    for name, rows in answers.items():
        if name in INFORMATIONAL:
            continue
        for verdict, n in verdict_counts(rows).items():
            counts[verdict] += n
    return counts


def _count(counts: Mapping[str, int], verdict: str) -> int:
    value = counts.get(verdict, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"the count of {verdict!r} rows must be a whole number >= 0, not {value!r}")
    return value


def headline(counts: Mapping[str, int]) -> str:
    """One sentence of the counts :func:`tally` returns: "4 incidents happened; 6 were prevented
    by guards; 2 could not be judged" (singular where one). A missing key counts 0; a key that is
    not a verdict, or a count that is not a whole number >= 0, is refused with ValueError."""
    for key in counts:
        _verdict(key)
    happened, prevented, unknown = (_count(counts, v) for v in COUNTED)
    return (f"{happened} incident{'' if happened == 1 else 's'} happened; "
            f"{prevented} {'was' if prevented == 1 else 'were'} prevented by guards; "
            f"{unknown} could not be judged")


def worst_severity(question_severity: str, counts: Mapping[str, int]) -> str:
    """The severity a question's rows are reported under: the worst :func:`row_severity` of the
    verdicts it has rows of (its own severity when it has none)."""
    present = [v for v in COUNTED if _count(counts, v)]
    levels = {row_severity(question_severity, v) for v in present} or {question_severity}
    return next(level for level in SEVERITIES if level in levels)


def gated(question_severity: str, counts: Mapping[str, int], levels: Iterable[str]) -> bool:
    """Whether a finding question's rows trip a gate at ``levels``: a happened or unknown row whose
    severity is one of them (prevented rows and records never do)."""
    wanted = set(levels) - {RECORD}
    return any(_count(counts, v) and row_severity(question_severity, v) in wanted for v in GATED)


def examples_first(rows: Sequence[Row], n: int) -> list[Row]:
    """The ``n`` rows a summary shows: the first row of each verdict present (so every verdict a
    question has is shown when ``n`` allows), then the rest; happened first, then unknown, then
    prevented, each kept in the question's own order (worst first)."""
    order = sorted(range(len(rows)), key=lambda i: _RANK.get(str(rows[i].get("verdict")), len(_RANK)))
    firsts: dict[Any, int] = {}
    for i in order:
        firsts.setdefault(rows[i].get("verdict"), i)
    chosen = list(firsts.values())[:n]
    chosen += [i for i in order if i not in set(chosen)][: max(n - len(chosen), 0)]
    return [rows[i] for i in sorted(chosen, key=order.index)]

"""Render question rows and the whole-report summary as a text table, JSON or CSV."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._evidence import Evidence, printable
from ._loading import LoadReport
from ._questions import SEVERITIES, Question
from ._verdicts import COUNTED, headline, row_severity, verdict_counts, worst_severity

__all__ = ["FORMATS", "WIDTH", "Format", "Report", "Section", "command_lines", "format_answer", "format_rows"]

Format = Literal["table", "json", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "csv")
_CELL_WIDTH = 40
WIDTH = 100
"""The text report never prints a line longer than this; ``--format json`` keeps full values."""
_MIN_CELL = 14
_INDENT = "   "


def _plain(value: Any) -> Any:
    """A JSON-friendly form of one DuckDB value (timestamps as ISO text, lists kept)."""
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _plain_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """``rows`` restricted to ``columns``, in that order, each value JSON-friendly (:func:`_plain`)."""
    return [{c: _plain(r.get(c)) for c in columns} for r in rows]


def _text(value: Any) -> str:
    plain = _plain(value)
    if plain is None:
        return ""
    if isinstance(plain, (list, dict)):  # json escapes C0 controls only: C1 and bidi ones too
        return printable(json.dumps(plain, ensure_ascii=False))
    # Newlines and tabs in a value never break the layout; control characters (ANSI escapes) never act.
    return printable(" ".join(str(plain).split()))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str], width: int) -> list[str]:
    """A table no wider than ``width``: widest columns narrowed first (cells cut with an
    ellipsis); when even that cannot fit, each row as ``column  value`` lines, values wrapped."""
    cells = [[_cut(_text(r.get(c)), _CELL_WIDTH) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    while sum(widths) + 2 * (len(widths) - 1) > width and max(widths, default=0) > _MIN_CELL:
        widest = widths.index(max(widths))
        widths[widest] -= 1
    if sum(widths) + 2 * (len(widths) - 1) <= width:
        head = [_cut(c, w) for c, w in zip(columns, widths)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths)).rstrip(), "  ".join("-" * w for w in widths)]
        lines += ["  ".join(_cut(v, w).ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
        return lines
    name_width = min(max(len(c) for c in columns), width // 3)
    lines = []
    for number, r in enumerate(rows, start=1):
        lines.append(f"row {number}")
        for column in columns:
            value = _text(r.get(column))
            wrapped = textwrap.wrap(value, width - name_width - 4, break_on_hyphens=False) or [""]
            lines.append(f"  {_cut(column, name_width).ljust(name_width)}  {wrapped[0]}")
            lines += [" " * (name_width + 4) + more for more in wrapped[1:]]
    return lines


def format_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: Format, *, width: int = WIDTH) -> str:
    """Rows of one question in ``fmt``; ``columns`` fixes the order (and the header when empty).

    The table fits in ``width`` columns (long values cut with an ellipsis); JSON and CSV carry
    every value in full.
    """
    if fmt == "json":
        return json.dumps(_plain_rows(rows, columns), indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(
                json.dumps(v) if isinstance(v, (list, dict)) else ("" if v is None else printable(str(v)))
                for v in (_plain(r.get(c)) for c in columns)
            )
        return out.getvalue().rstrip("\n")
    lines = _table(rows, columns, width)
    if not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def format_answer(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: Format, question: Question,
                  evidence: Evidence) -> str:
    """One question's answer with what it rests on: JSON carries the evidence and the caveats that
    apply to this question; a table is followed by one ``note:`` line per caveat (CSV stays rows)."""
    caveats = evidence.caveats(question.name)
    if fmt == "json":
        return json.dumps({"question": question.name, "verdicts": verdict_counts(rows),
                           "rows": _plain_rows(rows, columns), "caveats": caveats,
                           "evidence": _plain(evidence.as_dict())}, indent=2)
    text = format_rows(rows, columns, fmt)
    if fmt == "table":
        text += "".join(f"\nnote: {printable(c)}" for c in caveats)
    return text


def command_lines(words: Sequence[str], width: int = WIDTH, prefix: str = "") -> list[str]:
    """A shell command after ``prefix``, quoted, wrapped between words with ``\\`` continuations
    so each line fits ``width`` (a single word longer than a line is never split)."""
    lines: list[str] = []
    current = prefix
    for word in (shlex.quote(w) for w in words):
        if current != prefix and len(current) + 1 + len(word) + 2 > width:
            lines.append(current + " \\")
            current = " " * len(prefix) + "    " + word
        else:
            current = current + word if current == prefix else f"{current} {word}"
    lines.append(current)
    return lines


@dataclass
class Section:
    """One question's part of the report: how many rows, how many per verdict, and the worst few."""

    question: Question
    count: int
    examples: list[dict[str, Any]]
    columns: list[str] = field(default_factory=list)
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))
    """Rows per verdict (happened, prevented, unknown)."""

    @property
    def severity(self) -> str:
        """The severity its rows are reported under: the worst of its rows' (a question whose every
        row was prevented is never critical; see :func:`._verdicts.row_severity`)."""
        return worst_severity(self.question.severity, self.verdicts)

    def at(self, level: str) -> dict[str, int]:
        """Rows per verdict whose row severity is ``level`` (a question with happened and prevented
        rows of a critical question is reported under critical and warning, each with its rows)."""
        return {v: n for v, n in self.verdicts.items() if n and row_severity(self.question.severity, v) == level}

    def summary(self, level: str | None = None) -> str:
        """``2 finding(s): 1 happened, 1 unknown``, or for the rows at ``level`` of a question whose
        rows are split over levels ``1 of 2 finding(s): 1 prevented``."""
        noun = "finding(s)" if self.question.is_finding else "record(s)"
        shown = self.verdicts if level is None else self.at(level)
        part = sum(shown.values())
        split = ", ".join(f"{n} {verdict}" for verdict, n in shown.items() if n)
        head = f"{part} of {self.count} {noun}" if part != self.count else f"{self.count} {noun}"
        return head + (f": {split}" if split else "")


@dataclass
class Report:
    """Every question's section plus what loading found."""

    sections: list[Section]
    load: LoadReport
    paths: list[str]
    evidence: Evidence | None = None

    @property
    def findings(self) -> int:
        """Rows of the questions that report problems (waivers and refusals are records)."""
        return sum(s.count for s in self.sections if s.question.is_finding)

    @property
    def records(self) -> int:
        """Rows of the record questions: reported, never a failure of ``--fail-on``."""
        return sum(s.count for s in self.sections if not s.question.is_finding)

    @property
    def verdicts(self) -> dict[str, int]:
        """Rows per verdict over the finding questions, as :func:`._verdicts.tally` counts the rows."""
        return {v: sum(s.verdicts.get(v, 0) for s in self.sections if s.question.is_finding) for v in COUNTED}

    @property
    def headline(self) -> str:
        """"4 incidents happened; 6 were prevented by guards; 2 could not be judged"."""
        return headline(self.verdicts)

    def as_dict(self) -> dict[str, Any]:
        evidence = self.evidence
        return {
            "spans": self.load.spans,
            "files": self.load.files,
            "source": self.load.source,
            "warnings": evidence.warnings() if evidence else self.load.warnings(),
            "evidence": _plain(evidence.as_dict()) if evidence else None,
            "headline": self.headline,
            "verdicts": self.verdicts,
            "findings": self.findings,
            "records": self.records,
            "questions": [
                {
                    "question": s.question.name,
                    "description": s.question.description,
                    "severity": s.question.severity,
                    "reported_severity": s.severity,
                    "is_finding": s.question.is_finding,
                    "rows": s.count,
                    "verdicts": dict(s.verdicts),
                    "caveats": evidence.caveats(s.question.name) if evidence else [],
                    "next_step": s.question.next_step,
                    "judged_tool_spans": evidence.judged.get(s.question.name) if evidence else None,
                    "not_judged": evidence.not_judged(s.question.name) if evidence else None,
                    "command": ["outcome-telemetry", "forensics", "run", s.question.name, *self.paths],
                    "examples": _plain_rows(s.examples, s.columns),
                }
                for s in self.sections
            ],
        }

    def render(self, fmt: Format = "table") -> str:
        """The report in ``fmt``: JSON (everything), CSV (one line per question) or readable text."""
        if fmt == "json":
            return json.dumps(self.as_dict(), indent=2)
        if fmt == "csv":
            rows = [{"question": s.question.name, "severity": s.question.severity, "rows": s.count,
                     "is_finding": s.question.is_finding, "description": s.question.description,
                     "reported_severity": s.severity, **s.verdicts}
                    for s in self.sections]
            return format_rows(rows, ["question", "severity", "rows", "is_finding", "description",
                                      "reported_severity", *COUNTED], "csv")
        return "\n".join(printable(line) for line in self._text_lines())

    def _text_lines(self) -> list[str]:
        def wrap(text: str, indent: str = "") -> list[str]:
            return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                 break_on_hyphens=False, break_long_words=True) or [indent]

        origin = self.load.source or f"{self.load.files} file(s)"
        out = wrap(f"Forensics report: {self.load.spans:,} spans from {origin}")
        out += wrap(f"Verdict: {self.headline}")
        for warning in (self.evidence.warnings() if self.evidence else self.load.warnings()):
            out += wrap(f"warning: {warning}")
        if self.evidence:
            for line in self.evidence.render():
                lead = line[: len(line) - len(line.lstrip())]
                out += wrap(line.strip(), lead) if len(line) > WIDTH else [line]
        found = [s for s in self.sections if s.count]
        asked = sum(1 for s in found if s.question.is_finding)
        out += wrap(f"{self.findings} finding(s) in {asked} question(s); {self.records} record(s) "
                    f"(waivers and refusals: reported, not problems)")
        for level in SEVERITIES:
            group = [s for s in found if s.at(level)]
            if not group:
                continue
            out += ["", f"{level.upper()}"]
            for s in group:
                out += ["", _cut(f"== {s.question.name}: {s.summary(level)}", WIDTH)]
                out += wrap(s.question.description, _INDENT)
                examples = [r for r in s.examples
                            if row_severity(s.question.severity, str(r.get("verdict"))) == level]
                table = format_rows(examples, s.columns, "table", width=WIDTH - len(_INDENT))
                out += [_INDENT + line for line in table.splitlines()]
                if sum(s.at(level).values()) > len(examples):
                    out.append(f"{_INDENT}({sum(s.at(level).values()) - len(examples)} more row(s))")
                out += wrap(f"next: {s.question.next_step}", _INDENT)
                out += command_lines(["outcome-telemetry", "forensics", "run", s.question.name, *self.paths],
                                     WIDTH, _INDENT + "rows: ")
        unjudged = [(s.question.name, self.evidence.not_judged(s.question.name)) for s in self.sections
                     if not s.count and self.evidence and self.evidence.not_judged(s.question.name)]
        if unjudged:
            out += ["", "Not judged (nothing in these traces carries what they need):"]
            by_reason: dict[str, list[str]] = {}
            for name, reason in unjudged:
                by_reason.setdefault(str(reason), []).append(name)
            for reason, names in by_reason.items():
                out += wrap(f"{', '.join(names)}: {reason}", _INDENT)
        skipped = {name for name, _ in unjudged}
        clean = [s.question.name for s in self.sections if not s.count and s.question.name not in skipped]
        if clean:
            out += [""] + wrap("Nothing found: " + ", ".join(clean))
            if self.evidence:
                qualified = [name for name in clean if self.evidence.caveats(name)]
                if qualified:
                    out += wrap("given the evidence above (see its caveats): " + ", ".join(qualified), _INDENT)
        return out

"""Render question rows and the whole-report summary as a text table, JSON or CSV."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Sequence

from .evidence import Evidence
from .loading import LoadReport
from .questions import Question

Format = Literal["table", "json", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "csv")
_CELL_WIDTH = 40


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


def _cell(value: Any) -> str:
    plain = _plain(value)
    if plain is None:
        text = ""
    elif isinstance(plain, (list, dict)):
        text = json.dumps(plain)
    else:
        text = str(plain)
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"


def format_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: Format) -> str:
    """Rows of one question in ``fmt``; ``columns`` fixes the order (and the header when empty)."""
    if fmt == "json":
        return json.dumps([{c: _plain(r.get(c)) for c in columns} for r in rows], indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(
                json.dumps(v) if isinstance(v, (list, dict)) else ("" if v is None else v)
                for v in (_plain(r.get(c)) for c in columns)
            )
        return out.getvalue().rstrip("\n")
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def format_answer(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: Format, question: Question,
                  evidence: Evidence) -> str:
    """One question's answer with what it rests on: JSON carries the evidence and the caveats that
    apply to this question; a table is followed by one ``note:`` line per caveat (CSV stays rows)."""
    caveats = evidence.caveats(question.name)
    if fmt == "json":
        return json.dumps({"question": question.name, "rows": json.loads(format_rows(rows, columns, "json")),
                           "caveats": caveats, "evidence": _plain(evidence.as_dict())}, indent=2)
    text = format_rows(rows, columns, fmt)
    if fmt == "table":
        text += "".join(f"\nnote: {c}" for c in caveats)
    return text


@dataclass
class Section:
    """One question's part of the report: how many rows and the worst few."""

    question: Question
    count: int
    examples: list[dict[str, Any]]
    columns: list[str] = field(default_factory=list)


@dataclass
class Report:
    """Every question's section plus what loading found."""

    sections: list[Section]
    load: LoadReport
    paths: list[str]
    evidence: Optional[Evidence] = None

    @property
    def findings(self) -> int:
        """Rows of the questions that report problems (waivers are a record, not a finding)."""
        return sum(s.count for s in self.sections if s.question.is_finding)

    def as_dict(self) -> dict[str, Any]:
        evidence = self.evidence
        return {
            "spans": self.load.spans,
            "files": self.load.files,
            "warnings": evidence.warnings() if evidence else self.load.warnings(),
            "evidence": _plain(evidence.as_dict()) if evidence else None,
            "findings": self.findings,
            "questions": [
                {
                    "question": s.question.name,
                    "description": s.question.description,
                    "is_finding": s.question.is_finding,
                    "rows": s.count,
                    "caveats": evidence.caveats(s.question.name) if evidence else [],
                    "examples": [{c: _plain(r.get(c)) for c in s.columns} for r in s.examples],
                }
                for s in self.sections
            ],
        }

    def render(self, fmt: Format = "table") -> str:
        """The report in ``fmt``: JSON (everything), CSV (one line per question) or readable text."""
        if fmt == "json":
            return json.dumps(self.as_dict(), indent=2)
        if fmt == "csv":
            rows = [{"question": s.question.name, "rows": s.count, "is_finding": s.question.is_finding,
                     "description": s.question.description} for s in self.sections]
            return format_rows(rows, ["question", "rows", "is_finding", "description"], "csv")
        paths = " ".join(self.paths)
        out = [f"Forensics report: {self.load.spans:,} spans from {self.load.files} file(s)"]
        out += [f"warning: {w}" for w in (self.evidence.warnings() if self.evidence else self.load.warnings())]
        if self.evidence:
            out += self.evidence.render()
        found = [s for s in self.sections if s.count]
        clean = [s for s in self.sections if not s.count]
        out.append(f"{self.findings} finding(s) in {sum(1 for s in found if s.question.is_finding)} question(s)")
        for s in found:
            label = "record" if not s.question.is_finding else "found"
            out += ["", f"== {s.question.name}: {s.count} row(s) {label}", f"   {s.question.description}"]
            out += ["   " + line for line in format_rows(s.examples, s.columns, "table").splitlines()]
            more = f" ({s.count - len(s.examples)} more)" if s.count > len(s.examples) else ""
            out.append(f"   detail{more}: outcome-telemetry forensics {s.question.name} {paths}")
        if clean:
            out += ["", "Nothing found: " + ", ".join(s.question.name for s in clean)]
            if self.evidence:
                qualified = [s.question.name for s in clean if self.evidence.caveats(s.question.name)]
                if qualified:
                    out.append("   given the evidence above (see its caveats): " + ", ".join(qualified))
        return "\n".join(out)

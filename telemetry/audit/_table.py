"""The table a person reads: a row per tool with the seven answers, then each tool's noes and findings.

Names and descriptions can come from a server nobody trusts, so every piece of text is passed
through :func:`clean` before it reaches the terminal: control characters (escape sequences
included) and bidirectional overrides are removed, and long values are cut.
"""

from __future__ import annotations

import re
from typing import Final, TextIO

from ._model import CHECKS, CRITICAL, INFO, NO, NOT_APPLICABLE, WARNING, YES
from ._report import AuditReport

__all__ = ["CELL", "HEADERS", "clean", "render"]

HEADERS: Final = CHECKS
"""The seven columns are the checks' own names (conventions' ``AUDIT_*``), as in the JSON and SARIF."""
CELL: Final = {YES: "yes", NO: "NO", NOT_APPLICABLE: "n/a"}
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_SEVERITY_ORDER: Final = {CRITICAL: 0, WARNING: 1, INFO: 2}


def clean(text: object, limit: int = 200) -> str:
    """``text`` safe for a terminal: no control or direction characters, newlines as spaces, cut to ``limit``."""
    flat = _UNSAFE.sub("", str(text).replace("\n", " ").replace("\t", " ").replace("\r", " "))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def render(report: AuditReport, out: TextIO, *, fail_on: str = CRITICAL) -> None:
    """Print ``report`` as a table, then the evidence and fix for every no, then the findings."""
    rows = [(clean(t.tool.name, 40), clean(t.kind, 8), *(CELL[t.answers[c].verdict] for c in CHECKS)) for t in report.tools]
    header = ("tool", "kind", *HEADERS)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out.write(line + "\n" + "  ".join("-" * w for w in widths) + "\n")
    for row in rows:
        out.write("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")
    for target in report.targets:
        for note in target.notes:
            out.write(f"note ({clean(target.target, 60)}): {clean(note)}\n")
    if report.evidence is not None:
        ev = report.evidence
        out.write(f"traces: {ev.spans} spans, {len(ev.tools)} tools\n")
        for warning in ev.warnings:
            out.write(f"traces warning: {clean(warning)}\n")
    for audit in report.tools:
        if not audit.findings and not audit.tool.notes:
            continue
        out.write(f"\n{clean(audit.tool.name, 80)} ({clean(audit.kind)}, {clean(audit.kind_basis, 120)})\n")
        for note in audit.tool.notes:
            out.write(f"  note: {clean(note)}\n")
        for f in sorted(audit.findings, key=lambda f: _SEVERITY_ORDER.get(f.severity, 3)):
            where = f" [{clean(f.parameter, 40)}]" if f.parameter else ""
            out.write(f"  {f.severity.upper():8} {f.code} {f.rule}{where}: {clean(f.message, 300)}\n")
            out.write(f"           fix: {clean(f.fix, 300)}\n")
    out.write("\n" + report.summary_line() + (" -> fails --fail-on " + fail_on if report.failed(fail_on) else "") + "\n")

"""Run the audit over loaded tools (and trace evidence) and hold the result: the JSON form and the gate.

:func:`run_audit` decides each tool's kind, asks the checks and the lint, folds in what the
spans showed, and returns an :class:`AuditReport`. Its :meth:`~AuditReport.as_dict` is the
``--format json`` document, whose keys are stable and documented in ``docs/audit.md``;
:meth:`~AuditReport.failed` is the ``--fail-on`` gate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .. import __version__
from . import _infer as infer
from . import _traces as traces
from ._checks import answer_all, decide_kind, verified_through_cache
from ._lint import lint
from ._model import (
    CHECKS,
    CRITICAL,
    INFO,
    NO,
    NOT_APPLICABLE,
    READBACK_VERIFIED,
    SEVERITIES,
    WARNING,
    YES,
    ToolAudit,
    ToolModel,
)

__all__ = ["AuditReport", "FAIL_ON", "SCHEMA_ID", "TargetInfo", "run_audit"]

SCHEMA_ID: Final = "outcome-telemetry.audit/1"
"""The ``schema`` key of the JSON document; it changes only when a key changes meaning."""
NEVER: Final = "never"
FAIL_ON: Final = (CRITICAL, WARNING, NEVER)


@dataclass
class TargetInfo:
    """One target as given, what kind it was, and how many tools it gave."""

    target: str
    kind: str
    tools: int
    notes: list[str] = field(default_factory=list)


@dataclass
class AuditReport:
    """Every audited tool, the targets they came from, and the trace evidence read."""

    tools: list[ToolAudit]
    targets: list[TargetInfo]
    evidence: traces.TraceEvidence | None = None

    def findings(self) -> list[tuple[ToolAudit, Any]]:
        return [(t, f) for t in self.tools for f in t.findings]

    def counts(self) -> dict[str, int]:
        """How many answers are yes/no/not applicable, and findings per severity."""
        verdicts = Counter(a.verdict for t in self.tools for a in t.answers.values())
        severities = Counter(f.severity for t in self.tools for f in t.findings)
        return {YES: verdicts[YES], NO: verdicts[NO], NOT_APPLICABLE: verdicts[NOT_APPLICABLE],
                **{s: severities[s] for s in SEVERITIES}}

    def failed(self, fail_on: str = CRITICAL) -> bool:
        """``critical`` (the default: a critical finding, which includes every write that is not
        ``version_bound``), ``warning`` (a warning or worse) or ``never``."""
        counts = self.counts()
        if fail_on == NEVER:
            return False
        if fail_on == WARNING:
            return counts[CRITICAL] + counts[WARNING] > 0
        return counts[CRITICAL] > 0

    def summary_line(self, label: str = "audit") -> str:
        """One line: tools, yes of applicable, findings by severity."""
        counts = self.counts()
        applicable = counts[YES] + counts[NO]
        return (f"{label}: {len(self.tools)} tools, {counts[YES]} of {applicable} applicable answers yes, "
                f"{counts[CRITICAL]} critical, {counts[WARNING]} warning, {counts[INFO]} info")

    def as_dict(self, fail_on: str = CRITICAL) -> dict[str, Any]:
        counts = self.counts()
        return {
            "schema": SCHEMA_ID,
            "version": __version__,
            "fail_on": fail_on,
            "failed": self.failed(fail_on),
            "summary": {"tools": len(self.tools), "answers": {k: counts[k] for k in (YES, NO, NOT_APPLICABLE)},
                        "findings": {s: counts[s] for s in SEVERITIES}},
            "targets": [{"target": t.target, "kind": t.kind, "tools": t.tools, "notes": t.notes} for t in self.targets],
            "traces": traces.describe(self.evidence) if self.evidence is not None else None,
            "tools": [_tool_dict(t) for t in self.tools],
        }


def _tool_dict(audit: ToolAudit) -> dict[str, Any]:
    tool = audit.tool
    return {
        "name": tool.name,
        "target": tool.target,
        "kind": audit.kind,
        "kind_basis": audit.kind_basis,
        "description": tool.description,
        "source": None if tool.source is None else {"file": tool.source.file, "line": tool.source.line},
        "notes": tool.notes,
        "answers": {name: audit.answers[name].as_dict() for name in CHECKS},
        "findings": [f.as_dict() for f in audit.findings],
    }


def run_audit(models: Sequence[ToolModel], targets: Sequence[TargetInfo],
              evidence: traces.TraceEvidence | None = None) -> AuditReport:
    """Audit ``models`` (and every tool only the traces know, when ``evidence`` is given)."""
    models = list(models)
    if evidence is not None:
        known = {m.name for m in models}
        for name, ev in evidence.tools.items():
            if name not in known:
                models.append(ToolModel(name=name, target="traces", declared_kind=ev.kind,
                                        kind_source="spans' tool.kind" if ev.kind else "", from_traces_only=True))
    surface = sorted({m.name for m in models})
    cached = {m.name for m in models if m.reads_cache}
    audits = []
    for model in models:
        kind, basis_text, _basis = decide_kind(model)
        per_check = answer_all(model, kind, surface)
        seen = evidence.tools.get(model.name) if evidence is not None else None
        if evidence is not None and seen is not None:
            bulk = infer.is_bulk(model.name, infer.parameters(model.input_schema))
            traced = traces.answers_from(seen, evidence.scopes_declared, bulk=bulk)
            per_check = {name: traces.merge(per_check[name], traced[name], traces_only=model.from_traces_only)
                         for name in CHECKS}
        through = [model.verify_tool] if model.verify_tool else []
        through += seen.verified_through if seen is not None else []
        via_cache = verified_through_cache(model, kind, through, cached)
        if via_cache is not None:
            per_check[READBACK_VERIFIED] = via_cache
        lint_findings = [] if model.from_traces_only else lint(model, kind, surface)
        audits.append(ToolAudit(
            tool=model,
            kind=kind,
            kind_basis=basis_text,
            answers={name: per_check[name][0] for name in CHECKS},
            check_findings={name: per_check[name][1] for name in CHECKS},
            lint_findings=lint_findings,
        ))
    return AuditReport(audits, list(targets), evidence)

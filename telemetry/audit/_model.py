"""What the audit knows about one tool, and what it concludes: the shared vocabulary of the package.

Every target (a Python function, a guards object, an MCP server's listing, trace files) is turned
into :class:`ToolModel` values: the tool's name, description and JSON Schema, plus what it
*declares* (our ``kind`` and hints, MCP annotations, an idempotency guard, a read-back, scopes).
The checks turn a model into seven :class:`Answer` values and the lint into :class:`Finding` values.
Nothing here runs a tool.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final

from .. import conventions as c

__all__ = [
    "ACTIONABLE_ERRORS",
    "Answer",
    "CHECKS",
    "CRITICAL",
    "FROM_DECLARATION",
    "FROM_INFERENCE",
    "FROM_TRACES",
    "Finding",
    "IDEMPOTENT",
    "INFO",
    "NO",
    "NOT_APPLICABLE",
    "PREVIEWABLE",
    "READBACK_VERIFIED",
    "SCOPED",
    "SEMANTICALLY_OBSERVABLE",
    "SEVERITIES",
    "Source",
    "ToolAudit",
    "ToolModel",
    "VERDICTS",
    "VERSION_BOUND",
    "WARNING",
    "YES",
]

# The audit's words are defined in conventions (one place for every name a report carries);
# these are the short names the package and its users import.
YES, NO, NOT_APPLICABLE, VERDICTS = c.AUDIT_YES, c.AUDIT_NO, c.AUDIT_NOT_APPLICABLE, c.AUDIT_VERDICTS
SCOPED, IDEMPOTENT, VERSION_BOUND = c.AUDIT_SCOPED, c.AUDIT_IDEMPOTENT, c.AUDIT_VERSION_BOUND
PREVIEWABLE, READBACK_VERIFIED, SEMANTICALLY_OBSERVABLE = (
    c.AUDIT_PREVIEWABLE, c.AUDIT_READBACK_VERIFIED, c.AUDIT_SEMANTICALLY_OBSERVABLE)
ACTIONABLE_ERRORS = c.AUDIT_ACTIONABLE_ERRORS
CHECKS: Final = c.AUDIT_CHECKS
CRITICAL, WARNING, INFO = c.SEVERITY_CRITICAL, c.SEVERITY_WARNING, c.AUDIT_SEVERITY_INFO
SEVERITIES: Final = (CRITICAL, WARNING, INFO)
FROM_DECLARATION, FROM_INFERENCE, FROM_TRACES = c.AUDIT_FROM_DECLARATION, c.AUDIT_FROM_INFERENCE, c.AUDIT_FROM_TRACES


@dataclass(frozen=True)
class Source:
    """Where a Python tool is defined (for SARIF and for the person fixing it)."""

    file: str
    line: int


@dataclass
class ToolModel:
    """One tool as a target presents it. ``None`` always means "not declared", never "false"."""

    name: str
    target: str
    """The target it came from, as given on the command line."""
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    declared_kind: str | None = None
    """Our ``kind`` (``read``/``write``/``send``/``delegate``) when a declaration says it."""
    kind_source: str = ""
    """Which declaration said the kind: ``@instrument_tool``, MCP annotations, spans' ``tool.kind``."""
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    readback: bool | None = None
    """A read-back is declared (True), declared absent (False), or unknown (None)."""
    readback_evidence: str = ""
    instrumented: bool | None = None
    idempotency_key: str | None = None
    """The parameter an idempotency guard deduplicates on, when a guard is visible."""
    review_seconds: float | None = None
    """The review window a scheduled-send guard (``ScheduledSends.schedule_send``) declares: the
    call schedules the send instead of sending it."""
    scopes: tuple[str, ...] | None = None
    """The scopes a credential needs to see the tool, when it is served through a scoped inventory."""
    source: Source | None = None
    notes: list[str] = field(default_factory=list)
    from_traces_only: bool = False
    error_envelope: str | None = None
    """What declares the tool's error results a model can act on (a guard's refusal envelope,
    declared outcome codes), or None when nothing does."""
    reads_cache: bool = False
    """A read declared to answer from a cache (``telemetry.guards.reads_cache``, the tool plan)."""
    verify_tool: str | None = None
    """The read tool the tool plan says verifies this tool's effect (the caller's verification)."""


@dataclass(frozen=True)
class Answer:
    """One of the seven answers for one tool, with what it rests on and how to turn a no into a yes."""

    check: str
    verdict: str
    evidence: str
    fix: str | None = None
    basis: tuple[str, ...] = (FROM_DECLARATION,)

    def as_dict(self) -> dict[str, Any]:
        return {"answer": self.verdict, "evidence": self.evidence, "fix": self.fix, "basis": list(self.basis)}


@dataclass(frozen=True)
class Finding:
    """A problem with a code, a severity, the tool and parameter it is about, and a concrete fix."""

    code: str
    rule: str
    severity: str
    tool: str
    message: str
    fix: str
    parameter: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ToolAudit:
    """A tool with its decided kind, its seven answers and its findings."""

    tool: ToolModel
    kind: str
    kind_basis: str
    """``declared (...)`` or ``inferred from ...``: says which."""
    answers: dict[str, Answer]
    check_findings: dict[str, list[Finding]]
    """The findings behind each no, by check."""
    lint_findings: list[Finding]

    @property
    def findings(self) -> list[Finding]:
        """Every finding of this tool: the noes' first, in check order, then the lint's."""
        return [f for name in CHECKS for f in self.check_findings.get(name, [])] + self.lint_findings

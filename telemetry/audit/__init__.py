"""Audit a tool surface: the seven checks before write access, and the schema lint.

``outcome-telemetry audit`` (:mod:`._cli`) answers, for every tool an agent may call, the seven checks
(``scoped``, ``idempotent``, ``version_bound``, ``previewable``, ``readback_verified``,
``semantically_observable``, ``actionable_errors``: conventions' ``AUDIT_*``), each with evidence and a fix, and lints
its JSON Schema. Targets are Python tools (:mod:`._targets`, schemas built by :mod:`._schema`), MCP
servers (:mod:`._mcp_listing`) and trace files (:mod:`._traces`); :mod:`._checks` and :mod:`._lint`
decide, :mod:`._report` holds the result (and its JSON), :mod:`._table` and :mod:`._sarif` print it.
See ``docs/audit.md``.

    >>> from telemetry.audit import audit_tools          # doctest: +SKIP
    >>> report = audit_tools([store.read_state, store.write_state])
    >>> report.failed()
    False
"""

from __future__ import annotations

from typing import Any

from ._model import CHECKS, NO, NOT_APPLICABLE, YES, Answer, Finding, ToolAudit, ToolModel
from ._report import SCHEMA_ID, AuditReport, TargetInfo, run_audit
from ._sarif import to_sarif
from ._targets import tools_of


def audit_tools(obj: Any, *, label: str = "python") -> AuditReport:
    """Audit Python tools given as objects (anything a ``module:attribute`` target may name)."""
    models = tools_of(obj, label)
    return run_audit(models, [TargetInfo(label, "python", len(models))])


__all__ = [
    "CHECKS",
    "NO",
    "NOT_APPLICABLE",
    "SCHEMA_ID",
    "YES",
    "Answer",
    "AuditReport",
    "Finding",
    "TargetInfo",
    "ToolAudit",
    "ToolModel",
    "audit_tools",
    "run_audit",
    "to_sarif",
]

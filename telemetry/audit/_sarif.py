"""SARIF 2.1.0 for code-scanning UIs: one rule per finding code, one result per finding.

A Python tool's result points at its source file and line (relative to the directory the audit
ran in when the file is under it, so a repository's scanning UI can open it); an MCP or trace
tool has a logical location, the tool's name. Text from a server is only ever a JSON string
value here (``json.dumps`` escapes it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from .. import __version__
from ._model import CRITICAL, INFO, WARNING, Finding, ToolAudit
from ._report import AuditReport
from ._rules import RULES

SARIF_VERSION: Final = "2.1.0"
SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS: Final = {CRITICAL: "error", WARNING: "warning", INFO: "note"}
SRCROOT: Final = "SRCROOT"


def _rules() -> list[dict[str, Any]]:
    return [
        {
            "id": code,
            "name": rule,
            "shortDescription": {"text": rule.replace("-", " ")},
            "fullDescription": {"text": f"Prevents: {prevents}."},
            "help": {"text": "See docs/audit.md for the check and how to fix it with outcome-telemetry."},
            "defaultConfiguration": {"level": LEVELS[severity]},
        }
        for code, (rule, severity, prevents) in sorted(RULES.items())
    ]


def _location(audit: ToolAudit, root: Path) -> dict[str, Any]:
    logical = [{"name": audit.tool.name, "kind": "function", "fullyQualifiedName": f"{audit.tool.target}#{audit.tool.name}"}]
    source = audit.tool.source
    if source is None:
        return {"logicalLocations": logical}
    path = Path(source.file).resolve()
    try:
        # A URI reference, percent-encoded: `my tools#1/x.py` must not parse as a fragment.
        artifact: dict[str, Any] = {"uri": quote(path.relative_to(root).as_posix(), safe="/"), "uriBaseId": SRCROOT}
    except ValueError:
        artifact = {"uri": path.as_uri()}
    return {
        "physicalLocation": {"artifactLocation": artifact, "region": {"startLine": max(1, source.line)}},
        "logicalLocations": logical,
    }


def _result(audit: ToolAudit, f: Finding, index: dict[str, int], root: Path) -> dict[str, Any]:
    where = f" (parameter {f.parameter})" if f.parameter else ""
    return {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": LEVELS[f.severity],
        "message": {"text": f"{f.tool}{where}: {f.message}. Fix: {f.fix}"},
        "locations": [_location(audit, root)],
        "properties": {"tool": f.tool, "parameter": f.parameter, "severity": f.severity, "fix": f.fix,
                       "target": audit.tool.target},
    }


def to_sarif(report: AuditReport, *, root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The SARIF log of ``report``; source paths are made relative to ``root`` (default: the cwd)."""
    base = Path(root if root is not None else os.getcwd()).resolve()
    rules = _rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": {"name": "outcome-telemetry audit", "version": __version__,
                                    "semanticVersion": __version__, "rules": rules}},
                "originalUriBaseIds": {SRCROOT: {"uri": base.as_uri() + "/"}},
                "results": [_result(t, f, index, base) for t, f in report.findings()],
                "properties": {"targets": [t.target for t in report.targets]},
            }
        ],
    }

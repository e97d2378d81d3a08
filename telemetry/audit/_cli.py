"""``outcome-telemetry audit``: the seven checks and the schema lint, for Python tools, MCP servers and traces.

Exit status: 0 the gate passed, 1 ``--fail-on`` was met, 2 bad usage or a target that cannot be
loaded (named on stderr), 3 an unexpected failure (traceback on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import conventions as c
from .._command import EXIT_FINDINGS, EXIT_OK, CommandError, command_parser, dispatch
from ..exceptions import AuditTargetError
from . import _mcp_listing as mcp_listing
from . import _targets as targets
from ._model import CRITICAL, ToolModel
from ._report import FAIL_ON, AuditReport, TargetInfo, run_audit
from ._sarif import to_sarif
from ._table import render

__all__ = ["DESCRIPTION", "EPILOG", "FORMATS", "build_parser", "emit", "execute", "gather", "main"]

FORMATS = ("text", "json", "sarif")
"""``--format`` values; ``text`` is the human one, as in every command."""

EXIT_FAILED = EXIT_FINDINGS
"""A tool failed a check at or above ``--fail-on``."""

DESCRIPTION = f"""\
Answer seven questions for every tool an agent may call, before it gets write access:
  {c.AUDIT_SCOPED:23}  can this credential see only the tools it needs (others absent, not denied)?
  {c.AUDIT_IDEMPOTENT:23}  does the same write, retried, make one change instead of two?
  {c.AUDIT_VERSION_BOUND:23}  is a write built on a stale read refused instead of applied?
  {c.AUDIT_PREVIEWABLE:23}  does a bulk or destructive write show a plan before it commits?
  {c.AUDIT_READBACK_VERIFIED:23}  is each write read back from the source of truth?
  {c.AUDIT_SEMANTICALLY_OBSERVABLE:23}  would a 200 that did the wrong thing show up (outcome on the span)?
  {c.AUDIT_ACTIONABLE_ERRORS:23}  do its errors name a code, say when to retry, and keep stack traces out?
Each answer is yes, no or n/a, with its evidence and a one-line fix; read versus write comes from
the declaration (our kind, MCP annotations) or, failing that, the name, and says which. Then the
schema lint: unbounded numbers, enum candidates, missing descriptions, generic names, optional
parameters that change a write, guard bypasses, sends without a policy version, hand-offs without
a constraint list, ids without a format hint."""

EPILOG = """\
targets (several at once):
  module:attribute      a function, bound method, list/tuple/dict of them, a guards object
                        (StateStore, Planner, Delegations, Objectives, IdempotencyKeys,
                        ScopedTools) or an MCP server object; the module is imported, no tool runs
  --mcp-stdio COMMAND   start an MCP server (split like a shell would, run without a shell) and
                        read its tools/list
  --mcp-url URL         read tools/list from a running Streamable HTTP server
  --traces PATHS        what the tools did: OTLP JSON lines (files, directories, globs; the
                        [forensics] extra)

exit status: 0 passed; 1 --fail-on met (default: any critical finding, which includes a write
that is not version_bound); 2 bad usage or a target that cannot be loaded; 3 an unexpected failure.
A closed stdout (`... | head`) ends quietly with 0.

examples:
  outcome-telemetry audit myapp.tools:TOOLS
  outcome-telemetry audit --mcp-stdio "python examples/mcp_guarded_server.py --db /tmp/c.sqlite3"
  outcome-telemetry audit myapp.server:server --traces traces/ --format sarif > audit.sarif
  outcome-telemetry audit --traces traces/ --scopes scopes.json --fail-on warning
"""


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("audit", DESCRIPTION, EPILOG)
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="module:attribute of Python tools")
    parser.add_argument("--mcp-stdio", action="append", default=[], metavar="COMMAND",
                        help="an MCP server to start over stdio (repeatable)")
    parser.add_argument("--mcp-url", action="append", default=[], metavar="URL",
                        help="a running Streamable HTTP MCP server (repeatable)")
    parser.add_argument("--traces", action="append", nargs="+", default=[], metavar="PATHS",
                        help="trace files, directories or globs (repeatable)")
    parser.add_argument("--scopes", metavar="FILE",
                        help='with --traces: JSON {"agent id or glob": ["tool", ...]}; calls outside it are violations')
    parser.add_argument("--tool-spans", action="append", default=[], metavar="SELECTOR",
                        help="with --traces: make spans no format marks tool calls (a span-name glob or a JSON "
                             "selector file, as forensics takes it; docs/peer-traces.md); repeatable")
    parser.add_argument("--result-shape", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="with --traces: judge recorded results with FUNCTION first, as forensics does; repeatable")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: %(default)s)")
    parser.add_argument("--fail-on", choices=FAIL_ON, default=CRITICAL,
                        help="exit 1 on a critical finding (default), on a warning or worse, or never")
    parser.add_argument("--timeout", type=float, default=mcp_listing.DEFAULT_TIMEOUT_SECONDS,
                        help="seconds to wait for an MCP server's tools/list (default: %(default)s)")
    return parser


def gather(ns: argparse.Namespace) -> AuditReport:
    """Load every target named in ``ns`` and run the audit (raises AuditTargetError naming a bad one)."""
    models: list[ToolModel] = []
    infos: list[TargetInfo] = []

    def add(label: str, kind: str, found: list[ToolModel]) -> None:
        models.extend(found)
        notes = [n for m in found for n in m.notes if n.startswith("force_write_state")]
        infos.append(TargetInfo(label, kind, len(found), notes))

    for target in ns.targets:
        add(target, "python", targets.load(target))
    for command in ns.mcp_stdio:
        label = f"--mcp-stdio {command}"
        add(label, "mcp-stdio", [mcp_listing.from_listing(t, label) for t in mcp_listing.list_stdio(command, timeout=ns.timeout)])
    for url in ns.mcp_url:
        label = f"--mcp-url {url}"
        add(label, "mcp-url", [mcp_listing.from_listing(t, label) for t in mcp_listing.list_url(url, timeout=ns.timeout)])
    evidence = None
    paths = [p for group in ns.traces for p in group]
    if ns.scopes and not paths:
        raise AuditTargetError("--scopes needs --traces: it is checked against what agents called")
    if paths:
        from . import _traces as traces

        scopes = traces.load_scopes(ns.scopes) if ns.scopes else None
        evidence = traces.collect(paths, scopes, tool_spans=ns.tool_spans, result_shapes=ns.result_shape)
        infos.append(TargetInfo("--traces " + " ".join(paths), "traces", len(evidence.tools)))
    return run_audit(models, infos, evidence)


def emit(report: AuditReport, fmt: str, fail_on: str) -> None:
    if fmt == "text":
        render(report, sys.stdout, fail_on=fail_on)
        return
    document: dict[str, Any] = report.as_dict(fail_on) if fmt == "json" else to_sarif(report)
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def execute(ns: argparse.Namespace) -> int:
    """The body of ``outcome-telemetry audit``, on parsed arguments."""
    if not (ns.targets or ns.mcp_stdio or ns.mcp_url or ns.traces):
        raise CommandError("name at least one target (module:attribute, --mcp-stdio, --mcp-url or --traces); "
                           "see --help")
    mcp_listing.check_timeout(ns.timeout)  # before any target loads (and the MCP SDK with it)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # module:attribute resolves from here, as `python -m` would
    report = gather(ns)
    emit(report, ns.format, ns.fail_on)
    return EXIT_FAILED if report.failed(ns.fail_on) else EXIT_OK


def main(argv: Sequence[str]) -> int:
    """Run ``outcome-telemetry audit`` with ``argv`` (everything after ``audit``)."""
    return dispatch(build_parser(), execute, argv)

"""What the tools did, from their spans: the evidence that can overrule what they declare.

Trace files are loaded through :func:`telemetry.forensics.open_traces` (every format forensics
reads). Per tool name the audit counts: spans carrying an outcome, successful writes whose
read-back was ``skipped`` or ``error``, calls carrying an expected or policy version, an
idempotency key or a plan id, and the agents that called it. ``idempotency_conflicts`` gives the
repeated executions (one key and payload that ran twice), ``repeated_executions`` the calls
repeated with identical arguments and no key (other instrumentations' spans: their tool calls
come through the same ``spans`` relation, ``tool_spans`` selecting those no format marks), and
an optional scopes file
(``{"agent id or glob": ["tool", ...]}``) turns the agents into scope violations. Values from
traces are bound as query parameters, never pasted into SQL.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import conventions as c
from .._extras import require
from ..exceptions import AuditTargetError, ForensicsInputError
from . import _model as m
from ._rules import no as answer_no
from ._rules import yes as answer_yes

__all__ = [
    "EXCEPTION_PATTERN",
    "ToolTraces",
    "TraceEvidence",
    "answers_from",
    "collect",
    "describe",
    "load_scopes",
    "merge",
]

_PER_TOOL = """
SELECT tool_name,
       min(tool_kind) AS kind,
       count(*) AS calls,
       count(outcome) AS with_outcome,
       count(*) FILTER (WHERE coalesce(tool_kind, '') <> $read AND outcome = $ok) AS ok_writes,
       count(*) FILTER (WHERE coalesce(tool_kind, '') <> $read AND outcome = $ok
                          AND readback IN ($skipped, $error)) AS unverified,
       count(*) FILTER (WHERE state_version_expected IS NOT NULL OR policy_version IS NOT NULL) AS versioned,
       count(*) FILTER (WHERE idempotency_key_hash IS NOT NULL) AS keyed,
       count(*) FILTER (WHERE plan_id IS NOT NULL) AS planned,
       count(*) FILTER (WHERE deduplicated) AS replays,
       count(*) FILTER (WHERE schedule_event = $scheduled AND schedule_window_seconds > 0) AS scheduled
FROM spans WHERE tool_name IS NOT NULL
GROUP BY tool_name ORDER BY tool_name
"""
_ERRORS = """
WITH judged AS (
    SELECT tool_name, outcome,
           attribute_values[list_position(attribute_keys, $retry)] IS NOT NULL AS ours,
           attribute_values[list_position(attribute_keys, $code)] AS code,
           attribute_values[list_position(attribute_keys, $after)] AS after,
           coalesce(lower(attribute_values[list_position(attribute_keys, $leaked)]) IN ('true', '1'), false) AS leaked,
           attribute_values[list_position(attribute_keys, $verify)] AS verify,
           coalesce(span_format, '') NOT IN ('', $ours_format) AND outcome IS NOT NULL AND outcome <> $ok
               AND transport = $ok AS peer_error,
           attribute_values AS values_
    FROM spans WHERE tool_name IS NOT NULL
)
SELECT tool_name,
       count(*) FILTER (WHERE ours OR peer_error) AS error_results,
       count(*) FILTER (WHERE (ours AND code IS NULL) OR (peer_error AND outcome IN ($error, $tool_error))) AS uncoded,
       count(*) FILTER (WHERE ours AND outcome = $rate_limited AND after IS NULL) AS bare_rate_limits,
       count(*) FILTER (WHERE (ours AND leaked) OR (peer_error AND list_bool_or(list_transform(values_,
                        lambda v: regexp_matches(left(coalesce(v, ''), 4096), $exception_pattern))))) AS exception_texts,
       list_sort(list_distinct(list(verify) FILTER (WHERE verify IS NOT NULL))) AS verified_through
FROM judged GROUP BY tool_name
"""
EXCEPTION_PATTERN = (r'Traceback \(most recent call last\)|File "[^"]{1,300}", line [0-9]+'
                      r"|\b[A-Z][A-Za-z0-9_]*(Error|Exception)(:|\()"
                      r"|\b[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+\.[A-Z][A-Za-z0-9_]*:"
                      r"|\bat [A-Za-z0-9_$.]+\([A-Za-z0-9_$]+\.(java|kt|cs|js|ts):[0-9]+\)")
"""Exception text in a recorded result (the SQL form of ``telemetry.envelopes.exception_text``)."""
_BY_AGENT = """
SELECT tool_name, agent_id, count(*) AS calls FROM spans
WHERE tool_name IS NOT NULL AND agent_id IS NOT NULL GROUP BY ALL ORDER BY tool_name, agent_id
"""


@dataclass
class ToolTraces:
    """One tool's behaviour in the traces."""

    name: str
    kind: str | None
    calls: int
    with_outcome: int
    ok_writes: int
    unverified: int
    versioned: int
    keyed: int
    planned: int
    replays: int
    scheduled: int = 0
    """Calls that scheduled the send with a review window longer than 0 s (``ScheduledSends``)."""
    repeated: int = 0
    repeated_unkeyed: int = 0
    """Groups of calls in one run with identical arguments and no idempotency key (``repeated_executions``)."""
    unpersisted: int = 0
    """Accepted writes that the next read showed did not persist, whatever their read-back said."""
    agents: dict[str, int] = field(default_factory=dict)
    violations: dict[str, int] = field(default_factory=dict)
    """Agents that called it outside their declared scope, with how often."""
    error_results: int = 0
    """Results that reported a failure (ours: carrying ``tool.error.retry``; peers: a failed result)."""
    uncoded_errors: int = 0
    bare_rate_limits: int = 0
    """``rate_limited`` results that gave no retry-after."""
    exception_texts: int = 0
    verified_through: list[str] = field(default_factory=list)
    """The read tools its results asked the caller to verify through (``tool.verification.tool``)."""


@dataclass
class TraceEvidence:
    """Every tool seen in the traces, and how many spans were read."""

    paths: list[str]
    spans: int
    tools: dict[str, ToolTraces]
    scopes_declared: bool
    warnings: list[str]


def load_scopes(path: str) -> dict[str, list[str]]:
    """A scopes file: a JSON object mapping an agent id (or a glob of them) to the tools it may call."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditTargetError(f"--scopes {path!r}: cannot read it as JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(t, str) for t in v) for k, v in data.items()
    ):
        raise AuditTargetError(f'--scopes {path!r} must be a JSON object like {{"billing-*": ["charge_card"]}}')
    return data


def _allowed(agent: str, tool: str, scopes: Mapping[str, Sequence[str]]) -> bool | None:
    matched = [tools for pattern, tools in scopes.items() if fnmatch.fnmatchcase(agent, pattern)]
    if not matched:
        return None  # no declared scope for this agent: nothing to violate
    return any(tool in tools for tools in matched)


def collect(paths: Sequence[str], scopes: Mapping[str, Sequence[str]] | None = None, *,
            tool_spans: Sequence[str] | None = None, result_shapes: Sequence[str] | None = None) -> TraceEvidence:
    """Read ``paths`` (files, directories, globs) and summarise each tool's spans, ours and other
    instrumentations' (``tool_spans``/``result_shapes``: forensics' ``--tool-spans``/``--result-shape``)."""
    # forensics (DuckDB, the [forensics] extra) only here: the rest of the audit, and this module's
    # merging of trace answers, must import without it
    require("duckdb", extra="forensics", needed_for="--traces", error=AuditTargetError)
    from ..forensics import open_traces
    from ..forensics._questions import DOUBLE_EXECUTIONS

    params = {"read": c.KIND_READ, "ok": c.OUTCOME_OK, "skipped": c.READBACK_SKIPPED, "error": c.READBACK_ERROR,
              "scheduled": c.SCHEDULE_SCHEDULED}
    try:
        forensics = open_traces(paths, tool_spans=list(tool_spans or ()) or None,
                                result_shapes=list(result_shapes or ()) or None)
    except ForensicsInputError as exc:
        raise AuditTargetError(f"--traces {' '.join(paths)}: {exc}") from exc
    with forensics:
        con = forensics.connection
        cursor = con.execute(_PER_TOOL, params)
        columns = [d[0] for d in cursor.description]
        tools = {row[0]: ToolTraces(*row) for row in (tuple(r) for r in cursor.fetchall())}
        assert columns[0] == "tool_name"
        for row in forensics.run("idempotency_conflicts"):
            if row["kind"] in DOUBLE_EXECUTIONS and row["tool_name"] in tools:
                tools[row["tool_name"]].repeated += 1
        for row in forensics.run("repeated_executions"):
            if row["tool_name"] in tools:
                tools[row["tool_name"]].repeated_unkeyed += 1
        for row in forensics.run("unpersisted_writes"):
            if row["tool_name"] in tools:
                tools[row["tool_name"]].unpersisted += 1
        errors = {"retry": c.TOOL_ERROR_RETRY, "code": c.TOOL_ERROR_CODE, "after": c.TOOL_ERROR_RETRY_AFTER_SECONDS,
                  "leaked": c.TOOL_ERROR_EXCEPTION_TEXT, "verify": c.TOOL_VERIFICATION_TOOL, "ours_format": c.FORMAT_OURS,
                  "ok": c.OUTCOME_OK, "error": c.OUTCOME_ERROR, "tool_error": c.OUTCOME_TOOL_ERROR,
                  "rate_limited": c.OUTCOME_RATE_LIMITED, "exception_pattern": EXCEPTION_PATTERN}
        for tool, results, uncoded, bare, leaked, through in con.execute(_ERRORS, errors).fetchall():
            entry = tools[tool]
            entry.error_results, entry.uncoded_errors, entry.bare_rate_limits = results, uncoded, bare
            entry.exception_texts, entry.verified_through = leaked, list(through or [])
        for tool, agent, calls in con.execute(_BY_AGENT).fetchall():
            entry = tools[tool]
            entry.agents[agent] = calls
            if scopes is not None and _allowed(agent, tool, scopes) is False:
                entry.violations[agent] = calls
        return TraceEvidence(list(paths), forensics.load_report.spans, tools, scopes is not None,
                             forensics.load_report.warnings())


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100.0 * part / whole:.0f}%)"


def answers_from(ev: ToolTraces, scopes_declared: bool, *, bulk: str | None) -> dict[str, tuple[m.Answer, list[m.Finding]] | None]:
    """What the spans say for each check (None: the spans say nothing about it)."""
    name, writes = ev.name, ev.kind not in (None, c.KIND_READ)
    out: dict[str, tuple[m.Answer, list[m.Finding]] | None] = dict.fromkeys(m.CHECKS)

    def no(check: str, code: str, why: str, fix: str, severity: str | None = None) -> tuple[m.Answer, list[m.Finding]]:
        return answer_no(check, code, name, why, fix, severity=severity, basis=m.FROM_TRACES)

    def yes(check: str, why: str) -> tuple[m.Answer, list[m.Finding]]:
        return answer_yes(check, why, m.FROM_TRACES)

    agents = ", ".join(sorted(ev.agents)[:5]) + (" ..." if len(ev.agents) > 5 else "")
    if ev.violations:
        who = ", ".join(f"{a} ({n})" for a, n in sorted(ev.violations.items())[:5])
        out[m.SCOPED] = no(m.SCOPED, "AUD101", f"traces: called outside the caller's declared scope by {who}",
                         "serve each agent registry.scoped(its scopes), so the tool is absent from its inventory",
                         m.CRITICAL)
    elif scopes_declared and ev.agents:
        out[m.SCOPED] = yes(m.SCOPED, f"traces: every caller ({agents}) is within its declared scope")
    if ev.repeated:
        out[m.IDEMPOTENT] = no(m.IDEMPOTENT, "AUD102", f"traces: {ev.repeated} repeated execution(s): one key and payload "
                             f"ran again instead of returning the first outcome", "guard it with IdempotencyKeys."
                             "idempotent() on the key it already takes", m.CRITICAL)
    elif ev.repeated_unkeyed:
        out[m.IDEMPOTENT] = no(m.IDEMPOTENT, "AUD102", f"traces: called {ev.repeated_unkeyed} time(s) more than once in a "
                             f"run with identical arguments and no idempotency key", "give it an idempotency key and "
                             "guard it with IdempotencyKeys.idempotent()", m.CRITICAL)
    elif writes and ev.replays:
        out[m.IDEMPOTENT] = yes(m.IDEMPOTENT, f"traces: {ev.replays} retried call(s) were deduplicated")
    elif writes and ev.calls and ev.keyed == ev.calls:
        out[m.IDEMPOTENT] = yes(m.IDEMPOTENT, f"traces: all {ev.calls} calls carried an idempotency key, none ran twice")
    elif ev.kind == c.KIND_WRITE and ev.calls and ev.versioned == ev.calls:
        out[m.IDEMPOTENT] = yes(m.IDEMPOTENT, f"traces: all {ev.calls} calls were compare-and-set on an expected version")
    if ev.unpersisted:
        out[m.READBACK_VERIFIED] = no(m.READBACK_VERIFIED, "AUD105", f"traces: {ev.unpersisted} accepted write(s) did not "
                                    f"persist (the next read showed another version), whatever the read-back said",
                                    "read back from the source of truth, not a cache the write just filled", m.CRITICAL)
    elif writes and ev.ok_writes:
        if ev.unverified:
            out[m.READBACK_VERIFIED] = no(m.READBACK_VERIFIED, "AUD105", f"traces: {_share(ev.unverified, ev.ok_writes)} "
                                        f"successful writes had a skipped or error read-back",
                                        "give it a readback= that reads the source of truth (and cannot raise)")
        else:
            out[m.READBACK_VERIFIED] = yes(m.READBACK_VERIFIED, f"traces: all {ev.ok_writes} successful writes were read back")
    if ev.with_outcome < ev.calls:
        out[m.SEMANTICALLY_OBSERVABLE] = no(m.SEMANTICALLY_OBSERVABLE, "AUD106", f"traces: {_share(ev.calls - ev.with_outcome, ev.calls)} "
                                          f"spans carry no {c.TOOL_OUTCOME}", "record it with @instrument_tool")
    else:
        out[m.SEMANTICALLY_OBSERVABLE] = yes(m.SEMANTICALLY_OBSERVABLE, f"traces: all {ev.calls} spans carry {c.TOOL_OUTCOME}")
    if ev.kind in (c.KIND_WRITE, c.KIND_SEND) and ev.ok_writes:
        if ev.versioned:
            out[m.VERSION_BOUND] = yes(m.VERSION_BOUND, f"traces: {_share(ev.versioned, ev.calls)} calls carried the version "
                                     f"they were built on")
        elif ev.planned:
            out[m.VERSION_BOUND] = yes(m.VERSION_BOUND, f"traces: {ev.planned} call(s) committed a plan bound to versions")
    out[m.ACTIONABLE_ERRORS] = _actionable(ev, no, yes)
    if writes and ev.planned:
        out[m.PREVIEWABLE] = yes(m.PREVIEWABLE, f"traces: {ev.planned} call(s) ran a plan")
    elif writes and ev.scheduled:
        out[m.PREVIEWABLE] = yes(m.PREVIEWABLE, f"traces: {ev.scheduled} call(s) scheduled the send with a review "
                                 f"window instead of sending it")
    elif writes and bulk is not None:
        out[m.PREVIEWABLE] = no(m.PREVIEWABLE, "AUD104", f"traces: no call ran a plan, and {bulk}",
                              "split it into a plan and commit_plan(plan_id) (telemetry.guards.Planner)")
    return out


def _actionable(ev: ToolTraces, no: Callable[..., tuple[m.Answer, list[m.Finding]]],
                yes: Callable[..., tuple[m.Answer, list[m.Finding]]]) -> tuple[m.Answer, list[m.Finding]] | None:
    """What the error results in the traces say: a code each, a retry-after on each rate limit, no
    exception text (None: no error result was seen)."""
    if not ev.error_results:
        return None
    problems, fixes = [], []
    if ev.exception_texts:
        problems.append(f"{ev.exception_texts} error result(s) handed the model exception text or a stack trace")
        fixes.append("catch the exception and return a refusal envelope with a code; log the trace, never return it")
    if ev.uncoded_errors:
        problems.append(f"{_share(ev.uncoded_errors, ev.error_results)} error results named no code")
        fixes.append("give every failure a code the model can branch on (refusal(code, ...), outcomes=[...])")
    if ev.bare_rate_limits:
        problems.append(f"{ev.bare_rate_limits} rate limit(s) gave no retry-after")
        fixes.append("say how long to wait: refusal('rate_limited', ..., retry=True, retry_after_seconds=...)")
    if problems:
        severity = m.CRITICAL if ev.exception_texts else None
        return no(m.ACTIONABLE_ERRORS, "AUD107", "traces: " + "; ".join(problems), "; ".join(fixes), severity)
    return yes(m.ACTIONABLE_ERRORS, f"traces: each of {ev.error_results} error result(s) named a code, and every rate "
               f"limit a retry-after")


def merge(static: tuple[m.Answer, list[m.Finding]], traced: tuple[m.Answer, list[m.Finding]] | None,
          *, traces_only: bool) -> tuple[m.Answer, list[m.Finding]]:
    """One answer from the declaration and the spans: what a tool did overrules what it declares."""
    s_answer, s_findings = static
    if traced is None:
        if traces_only:
            note = f"only traces were audited, and they do not show it; {s_answer.evidence}"
            return m.Answer(s_answer.check, s_answer.verdict, note, s_answer.fix, s_answer.basis), [
                m.Finding(f.code, f.rule, f.severity, f.tool, note, f.fix, f.parameter) for f in s_findings]
        return static
    t_answer, t_findings = traced
    if traces_only:
        return traced
    basis = tuple(dict.fromkeys(s_answer.basis + t_answer.basis))
    evidence = f"{s_answer.evidence}; {t_answer.evidence}"
    if t_answer.verdict == m.NO:
        fix = s_answer.fix or t_answer.fix
        severity = max((f.severity for f in s_findings + t_findings), key=lambda s: s == m.CRITICAL)
        base = (s_findings or t_findings)[0]
        merged = m.Finding(base.code, base.rule, severity, base.tool, evidence, fix or base.fix, base.parameter)
        return m.Answer(s_answer.check, m.NO, evidence, fix, basis), [merged]
    if s_answer.verdict == m.NOT_APPLICABLE:
        return static
    return m.Answer(s_answer.check, s_answer.verdict, evidence, s_answer.fix, basis), s_findings


def describe(ev: TraceEvidence) -> dict[str, Any]:
    """The JSON summary of what was read."""
    return {"paths": ev.paths, "spans": ev.spans, "tools": len(ev.tools), "scopes_declared": ev.scopes_declared,
            "warnings": ev.warnings}

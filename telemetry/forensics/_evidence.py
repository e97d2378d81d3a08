"""What the answers rest on: the evidence section of every report and every question's JSON.

A question over incomplete or inconsistent evidence must say so rather than answer "nothing".
After loading (from any source: everything here is SQL over the loaded ``spans`` relation) this
gathers, once per connection:

- spans read, duplicate copies dropped (per file) and conflicting copies (from :mod:`._dedup`),
  lines skipped and truncated (from loading);
- spans the kind-dependent questions cannot use, by reason, and how many had their ``tool.kind``
  inferred from their attributes;
- tool spans without ``gen_ai.conversation.id`` (each of their traces becomes its own run, so
  run-scoped questions cannot connect them);
- delegation chains whose root registration is missing, and chains with a missing middle hop;
- clock skew per service (``service.name``): children that start before their parent or end after
  it by more than :data:`SKEW_TOLERANCE_NS`, with the estimated offset. The ``clock_skew`` table it
  fills is what ``order_uncertain`` in the order-dependent questions reads. A source that reads
  only tool spans and their parents (ClickHouse) says so: skew between two other spans is unseen;
- per source format (ours and every other instrumentation's, :mod:`._format_evidence`): spans
  read, tool calls recognised, calls without a recorded result, what was inferred and from what;
- our tool spans without ``tool.silent_failure`` (older writers, other writers of our conventions),
  and how many of them the silent-failure rule may make silent failures (judged ``unknown``);
- per question, how many tool spans carry what it needs (:data:`.questions.NEEDS`): a question
  none could give it to is *not judged*, with the reason, instead of "nothing found".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from .. import conventions as c
from .._terminal import safe
from ._format_evidence import FormatEvidence, gather_formats
from ._loading import LoadReport
from ._questions import NEEDS, QUESTION_NAMES


def printable(text: str) -> str:
    """``text`` safe for a terminal: control characters (ANSI escapes, carriage returns) and
    bidirectional overrides shown as ``\\xNN``/``\\uNNNN`` instead of acting. Values from traces
    are hostile; the text report and every warning pass through this (the CLI's streams filter
    the same characters again: :mod:`telemetry._terminal`)."""
    return safe(text)


SKEW_TOLERANCE_NS = 1_000_000
"""A child may start before its parent or end after it by this much (1 ms) before it is skew."""
MISSING_CONVERSATION_WARN = 0.05
"""Warn when more than this share of tool spans carries no conversation id."""
LISTED = 20
"""How many chains and services the evidence names (all are counted)."""

KIND_DEPENDENT = frozenset({"divergent_reads", "lost_updates", "unpersisted_writes", "stale_sends",
                            "stale_holders", "contention"})
"""Questions that select spans by tool kind: spans whose kind is unknown are invisible to them."""
ORDER_DEPENDENT = frozenset({"divergent_reads", "lost_updates", "unpersisted_writes", "stale_sends",
                             "stale_holders"})
"""Questions whose answer depends on which span came first: clock skew can change it."""
SILENT_DEPENDENT = frozenset({"silent_failures", "readback_mismatches", "plan_violations"})
"""Questions whose verdict reads ``tool.silent_failure``: a span without it may be judged unknown."""
CHAIN_DEPENDENT = frozenset({"constraint_loss_by_hop", "waivers_by_hop"})
"""Questions that follow delegation chains: a missing hop hides what it carried."""

_SKEW_SQL = f"""
INSERT INTO clock_skew
WITH multi AS (
    SELECT trace_id FROM spans_base GROUP BY trace_id
    HAVING min(coalesce(service_name, '')) <> max(coalesce(service_name, ''))  -- two services or more
),
sp AS (
    SELECT trace_id, span_id, parent_span_id, coalesce(service_name, '') AS service,
           CAST(start_time_unix_nano AS BIGINT) AS s, CAST(end_time_unix_nano AS BIGINT) AS e
    FROM spans_base SEMI JOIN multi USING (trace_id)
),
pairs AS (
    SELECT c.service, p.service AS parent_service,
           CASE WHEN c.s - p.s < -{SKEW_TOLERANCE_NS} THEN c.s - p.s
                WHEN c.e - p.e > {SKEW_TOLERANCE_NS} THEN c.e - p.e END AS violation
    FROM sp c JOIN sp p ON p.trace_id = c.trace_id AND p.span_id = c.parent_span_id
    WHERE c.service <> p.service
)
SELECT service, mode(parent_service), count(*), count(violation),
       CAST(median(violation) AS BIGINT), max(abs(violation))
FROM pairs GROUP BY service HAVING count(violation) > 0
"""


@dataclass
class Evidence:
    """Everything a reader needs to judge the answers; see the module docstring."""

    load: LoadReport
    spans_kept: int = 0
    tool_spans: int = 0
    kind_inferred: dict[str, int] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)
    """Spans a kind-dependent question cannot use, by reason."""
    without_conversation_spans: int = 0
    without_conversation_traces: int = 0
    chains: int = 0
    chains_without_root: list[dict[str, Any]] = field(default_factory=list)
    chains_without_root_count: int = 0
    gaps: list[dict[str, Any]] = field(default_factory=list)
    gap_count: int = 0
    clock_skew: list[dict[str, Any]] = field(default_factory=list)
    formats: FormatEvidence = field(default_factory=FormatEvidence)
    judged: dict[str, int] = field(default_factory=dict)
    """Per question, the tool spans that carry what it needs (:data:`.questions.NEEDS`)."""
    silent_unrecorded: int = 0
    """Our tool spans without ``tool.silent_failure`` (older writers, other writers of our conventions)."""
    silent_unconfirmed: int = 0
    """Of those, the spans the silent-failure rule may make silent failures: judged unknown."""

    def silent_note(self) -> str | None:
        """What the spans without ``tool.silent_failure`` did to the answers, or None when every span has it."""
        if not self.silent_unrecorded:
            return None
        return (f"{self.silent_unrecorded:,} of our tool span(s) carry no {c.TOOL_SILENT_FAILURE} (written before it "
                f"existed, or by another writer); {self.silent_unconfirmed:,} of them (transport ok, outcome not ok, "
                "no refusal, pause or exception) could be silent failures, but whether the result itself reported "
                "the failure is not recorded, so they are judged unknown; the rest are not silent failures")

    def not_judged(self, question: str) -> str | None:
        """Why ``question`` could judge nothing in these traces, or None when some span could be judged."""
        if question not in self.judged or self.judged[question]:
            return None
        needs = NEEDS[question]
        if not self.tool_spans:
            return f"no tool spans were read, so nothing carries {needs.what}"
        named = ", ".join(f"{f.tool_calls:,} {f.name}" for f in self.formats.formats.values() if f.tool_calls)
        return f"none of the {self.tool_spans:,} tool call(s) ({named}) carries {needs.what}"

    def caveats(self, question: str) -> list[str]:
        """What about the evidence could change ``question``'s answer, one sentence each."""
        out: list[str] = []
        reason = self.not_judged(question)
        if reason is not None:
            out.append(f"not judged: {reason}")
        if question in ("masked_failures", "repeated_executions"):
            missing = [(f.name, f.without_result if question != "repeated_executions" else f.without_arguments)
                       for f in self.formats.formats.values() if f.name != "outcome-telemetry"]
            missing = [(name, n) for name, n in missing if n]
            if missing:
                what = "recorded arguments" if question == "repeated_executions" else "a recorded result"
                out.append(f"{sum(n for _, n in missing):,} tool call(s) without {what} could not be judged "
                           f"({', '.join(f'{name} {n:,}' for name, n in missing)}; the evidence names the "
                           "setting that records them)")
        if self.load.duplicates.conflicting:
            out.append(f"{self.load.duplicates.conflicting:,} span(s) had differing copies; one of each was kept")
        if self.load.skipped_lines or self.load.truncated:
            out.append(f"{self.load.skipped_lines:,} bad line(s) skipped and {len(self.load.truncated)} "
                       "truncated file(s): spans on those lines are not in the answer")
        if self.load.skipped_row_count:
            out.append(f"{self.load.skipped_row_count:,} malformed row(s) skipped: their spans are not in the answer")
        if self.load.unreadable:
            out.append(f"{len(self.load.unreadable):,} unreadable folder(s) or file(s) skipped (--skip-unreadable): "
                       "their spans are not in the answer")
        if question in KIND_DEPENDENT and self.ignored:
            out.append(f"{sum(self.ignored.values()):,} span(s) without a usable tool.kind are not examined "
                       f"({', '.join(f'{r}: {n:,}' for r, n in sorted(self.ignored.items()))})")
        if question != "silent_failures" and self.without_conversation_spans:
            out.append(f"{self.without_conversation_spans:,} tool span(s) have no gen_ai.conversation.id; each of "
                       f"their {self.without_conversation_traces:,} trace(s) is its own run, so they are compared "
                       "only within their trace")
        if question in CHAIN_DEPENDENT and (self.chains_without_root_count or self.gap_count):
            out.append(f"{self.chains_without_root_count:,} delegation chain(s) lack their root registration "
                       f"(judged from the earliest hop present) and {self.gap_count:,} task(s) have a missing "
                       "parent hop")
        if question in SILENT_DEPENDENT and self.silent_unrecorded:
            out.append(str(self.silent_note()))
        if question in ORDER_DEPENDENT and self.clock_skew:
            names = ", ".join(f"{s['service_name']} ({s['offset_ms']:+.3f} ms)" for s in self.clock_skew[:3])
            out.append(f"clock skew detected ({names}); rows whose deciding order is within it are marked "
                       "order_uncertain")
        if question in ORDER_DEPENDENT and self.load.parent_spans is not None:
            out.append(f"clock skew was judged on tool spans and the {self.load.parent_spans:,} span(s) that "
                       "parent them (all this source reads); skew seen only between other spans is not detected")
        return out

    def warnings(self) -> list[str]:
        """Loading's warnings plus the evidence a reader must know about before trusting a count."""
        out = self.load.warnings() + self.formats.warnings()
        if self.tool_spans and self.without_conversation_spans / self.tool_spans > MISSING_CONVERSATION_WARN:
            share = self.without_conversation_spans / self.tool_spans
            out.append(f"{share:.0%} of tool spans ({self.without_conversation_spans:,}) have no "
                       "gen_ai.conversation.id (nor their format's session id): each of their traces is treated "
                       "as its own run, so questions that compare spans within a run cannot connect them across "
                       "traces")
        if self.ignored:
            out.append(f"{sum(self.ignored.values()):,} span(s) lack a tool.kind their attributes can decide; "
                       "kind-dependent questions do not examine them")
        if self.silent_unconfirmed:
            out.append(str(self.silent_note()))
        if self.chains_without_root_count or self.gap_count:
            out.append(f"{self.chains_without_root_count:,} delegation chain(s) without their root registration, "
                       f"{self.gap_count:,} task(s) whose parent hop is missing")
        for skew in self.clock_skew:
            out.append(f"clock skew: {skew['service_name']} is about {skew['offset_ms']:+.3f} ms off against "
                       f"{skew['relative_to']} ({skew['violations']:,} of {skew['pairs']:,} parent/child pairs "
                       "out of order)")
        return [printable(w) for w in out]

    def _skew_basis(self) -> str:
        if self.load.parent_spans is None:
            return "every parent/child pair read"
        return (f"tool spans and their {self.load.parent_spans:,} parent span(s) only (other spans "
                "are not read from this source)")

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.load.files,
            "spans_read": self.load.spans,
            "spans_kept": self.spans_kept,
            "duplicates": self.load.duplicates.as_dict(),
            "lines_skipped": self.load.skipped_lines,
            "lines_skipped_by_file": {str(d.path): [b.number for b in d.bad] for d in self.load.skipped},
            "truncated_files": [str(p) for p in self.load.truncated],
            "unreadable_skipped": {"count": len(self.load.unreadable),
                                   "paths": [{"path": p, "reason": why} for p, why in self.load.unreadable]},
            "tool_spans": self.tool_spans,
            "tool_kind_inferred": dict(self.kind_inferred),
            "spans_ignored": dict(self.ignored),
            "runs_without_conversation_id": {"spans": self.without_conversation_spans,
                                             "traces": self.without_conversation_traces},
            "delegation_chains": self.chains,
            "chains_without_root": {"count": self.chains_without_root_count, "chains": self.chains_without_root},
            "chains_with_gaps": {"count": self.gap_count, "gaps": self.gaps},
            "rows_skipped": {"count": self.load.skipped_row_count,
                             "rows": [{"trace_id": r.trace_id, "span_id": r.span_id, "reason": r.reason}
                                      for r in self.load.skipped_rows]},
            "clock_skew": {"tolerance_ms": SKEW_TOLERANCE_NS / 1e6, "services": self.clock_skew,
                           "judged_on": self._skew_basis(), "parent_spans": self.load.parent_spans},
            "span_formats": self.formats.as_dict(),
            "silent_failure_unrecorded": {"tool_spans": self.silent_unrecorded,
                                          "judged_unknown": self.silent_unconfirmed},
            "questions_judged": {name: {"tool_spans": self.judged.get(name, 0), "not_judged": self.not_judged(name)}
                                 for name in QUESTION_NAMES},
            "warnings": self.warnings(),
        }

    def render(self) -> list[str]:
        """The text report's evidence section."""
        d = self.load.duplicates
        out = ["Evidence:",
               f"  spans read {self.load.spans:,} from {self.load.files} file(s); kept {self.spans_kept:,} "
               f"(duplicates dropped {d.dropped:,}, conflicting {d.conflicting:,})"]
        if self.load.skipped_lines or self.load.truncated:
            out.append(f"  lines skipped {self.load.skipped_lines:,}; truncated files {len(self.load.truncated)}")
        if self.load.skipped_row_count:
            out.append(f"  malformed rows skipped {self.load.skipped_row_count:,}")
        if self.load.unreadable:
            out.append(f"  unreadable folders or files skipped {len(self.load.unreadable):,}: "
                       + printable(", ".join(p for p, _ in self.load.unreadable[:5]))
                       + (" ..." if len(self.load.unreadable) > 5 else ""))
        if self.kind_inferred:
            out.append("  tool.kind inferred: " + ", ".join(f"{k} {n:,}" for k, n in sorted(self.kind_inferred.items())))
        if self.ignored:
            out.append("  spans ignored: " + ", ".join(f"{r} {n:,}" for r, n in sorted(self.ignored.items())))
        out += self.formats.render()
        if self.silent_unrecorded:
            out.append(f"  without {c.TOOL_SILENT_FAILURE}: {self.silent_unrecorded:,} of our tool span(s); "
                       f"{self.silent_unconfirmed:,} could be silent failures and are judged unknown")
        out.append(f"  tool spans without a conversation id: {self.without_conversation_spans:,} "
                   f"(in {self.without_conversation_traces:,} trace(s))")
        out.append(f"  delegation chains {self.chains:,}: without root {self.chains_without_root_count:,}, "
                   f"tasks with a missing parent hop {self.gap_count:,}")
        for gap in self.gaps[:3]:
            out.append(f"    gap: run {gap['run_id']} chain {gap['root_task_id']}: task {gap['task_id']} "
                       f"(hop {gap['hop']}) names parent {gap['missing_task_id']}, which is not in the evidence")
        out.append("  clock skew: " + (", ".join(
            f"{s['service_name']} {s['offset_ms']:+.3f} ms vs {s['relative_to']}" for s in self.clock_skew)
            or f"none detected (tolerance {SKEW_TOLERANCE_NS / 1e6:g} ms)") + f"; judged on {self._skew_basis()}")
        for conflict in d.conflicts[:3]:
            out.append(f"    conflicting copies: trace {conflict['trace_id']} span {conflict['span_id']} in "
                       f"{', '.join(conflict['files'])}; kept {conflict['kept_file']}")
        return out


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """The rows of ``sql`` (``params`` bound) as dictionaries by column name, in the query's order."""
    return columns_and_rows(con, sql, params)[1]


def columns_and_rows(con: duckdb.DuckDBPyConnection, sql: str,
                     params: Sequence[Any] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """``sql``'s column names and :func:`rows`, from one execution: its result already names the
    columns, so a caller that needs both never binds the statement a second time."""
    result = con.execute(sql) if params is None else con.execute(sql, list(params))
    columns = [d[0] for d in result.description]
    return columns, [dict(zip(columns, row)) for row in result.fetchall()]


_COUNTS_SQL = """
SELECT count(*),
       count(*) FILTER (WHERE tool_name IS NOT NULL),
       count(*) FILTER (WHERE tool_name IS NOT NULL AND run_id = trace_id),
       count(DISTINCT trace_id) FILTER (WHERE tool_name IS NOT NULL AND run_id = trace_id),
       count(*) FILTER (WHERE span_format = 'outcome-telemetry'),
       """ + ",\n       ".join(f"count(*) FILTER (WHERE tool_name IS NOT NULL AND {NEEDS[name].predicate()})"
                             for name in QUESTION_NAMES) + f""",
       count(*) FILTER (WHERE silent_failure IS NULL AND span_format = '{c.FORMAT_OURS}'),
       count(*) FILTER (WHERE silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type))
FROM spans
"""
"""One scan for the counts: spans, tool spans, tool spans whose run is their trace (no
gen_ai.conversation.id, nor on another instrumentation's span its format's session id), and per
question the tool spans it could judge (predicates from :data:`NEEDS`)."""
_KINDS_SQL = """
SELECT span_format, tool_kind_source, tool_kind, count(*) FROM spans
WHERE tool_kind_source <> 'recorded' AND (tool_name IS NOT NULL OR state_key IS NOT NULL
      OR objective_task_id IS NOT NULL OR idempotency_key_hash IS NOT NULL)
GROUP BY ALL
"""
"""Where the kinds came from, in one scan: ours in the evidence's own counts, other
instrumentations' in their format's (:mod:`._format_evidence`)."""


def gather(con: duckdb.DuckDBPyConnection, load: LoadReport, *, shape_failures: int = 0) -> Evidence:
    """Compute the evidence over the loaded ``spans`` in ``con`` (and fill ``clock_skew``);
    ``shape_failures`` counts the ``--result-shape`` calls that raised while loading."""
    con.execute("DELETE FROM clock_skew").fetchall()
    con.execute(_SKEW_SQL).fetchall()
    evidence = Evidence(load=load)
    counts = con.execute(_COUNTS_SQL).fetchall()[0]
    evidence.spans_kept, evidence.tool_spans = int(counts[0]), int(counts[1])
    evidence.without_conversation_spans, evidence.without_conversation_traces = int(counts[2]), int(counts[3])
    evidence.judged = {name: int(n) for name, n in zip(QUESTION_NAMES, counts[5:5 + len(QUESTION_NAMES)])}
    evidence.silent_unrecorded, evidence.silent_unconfirmed = (int(n) for n in counts[5 + len(QUESTION_NAMES):])
    kinds = con.execute(_KINDS_SQL).fetchall()
    peer_kinds = [(fmt, source, n) for fmt, source, _kind, n in kinds if fmt not in (None, "outcome-telemetry")]
    evidence.formats = gather_formats(con, shape_failures, peer_kinds, ours=int(counts[4]))
    for fmt, source, kind, n in kinds:
        if fmt not in (None, "outcome-telemetry"):
            continue  # another instrumentation's tool call: in its format's evidence
        # Ours and unmarked spans arrive as separate groups under one label: add, never overwrite.
        if source == "inferred":
            evidence.kind_inferred[str(kind)] = evidence.kind_inferred.get(str(kind), 0) + int(n)
        else:
            label = ("no tool.kind, attributes of more than one kind" if source == "ambiguous"
                     else "no tool.kind, no attribute decides it")
            evidence.ignored[label] = evidence.ignored.get(label, 0) + int(n)
    chains = rows(con, "SELECT run_id, root_task_id, baseline_hop, root_seen FROM delegation_chains "
                        "ORDER BY run_id, root_task_id")
    evidence.chains = len(chains)
    rootless = [{k: c[k] for k in ("run_id", "root_task_id", "baseline_hop")} for c in chains if not c["root_seen"]]
    evidence.chains_without_root_count, evidence.chains_without_root = len(rootless), rootless[:LISTED]
    gaps = rows(con, "SELECT run_id, root_task_id, missing_task_id, task_id, hop FROM delegation_gaps "
                      "ORDER BY run_id, root_task_id, hop, task_id")
    evidence.gap_count, evidence.gaps = len(gaps), gaps[:LISTED]
    evidence.clock_skew = [
        {"service_name": r["service_name"], "relative_to": r["relative_to"], "pairs": r["pairs"],
         "violations": r["violations"], "offset_ms": r["offset_ns"] / 1e6, "uncertainty_ms": r["uncertainty_ns"] / 1e6}
        for r in rows(con, "SELECT * FROM clock_skew ORDER BY uncertainty_ns DESC, service_name LIMIT "
                            f"{LISTED}")
    ]
    return evidence

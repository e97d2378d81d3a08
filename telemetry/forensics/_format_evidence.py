"""Evidence per source format: what each instrumentation's spans gave the questions, and what not.

Read from ``peer_spans`` (the span-format layer in ``queries/spans.sql``) and the ``spans`` view,
once per connection, for the evidence section of every report: per format the spans read, the
tool calls recognised, the calls without a recorded result (and the setting that turns content
capture on for that format), results skipped as too large or malformed, what was inferred and
from what (the run from a session id, the kind from the name, the call id from the parent LLM
span, the error type from the exception event), the spans not understood and why, and what the format can never tell. Spans that look
like function spans (``code.function``) but that no format marks and no ``--tool-spans``
selected are counted, with how to select them.

Nothing of a call's content is read here: counts, format names and setting names only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from .. import conventions as c
from .._span_formats import FORMATS, SpanFormat

__all__ = ["FormatCounts", "FormatEvidence", "gather_formats"]

_BY_NAME: dict[str, SpanFormat] = {f.name: f for f in FORMATS}
_SELECTED_CONTENT = ("the attributes the --tool-spans selector names (for logfire: record_return=True "
                     "records the result)")
_SELECTED_CANNOT_TELL = ("a read-back (state success): nothing read the state back, so tool.readback is "
                         "unknown; only what the selector names")
HOW_TO_SELECT = ("select them with --tool-spans 'GLOB' (a span-name glob) or --tool-spans FILE.json "
                 "(docs/peer-traces.md)")

_PEER_SQL = """
SELECT span_format,
       count(*) AS spans,
       count(*) FILTER (WHERE is_tool_call) AS tool_calls,
       count(*) FILTER (WHERE is_tool_call AND result_status = 'absent') AS without_result,
       count(*) FILTER (WHERE is_tool_call AND result_status = 'too_large') AS results_too_large,
       count(*) FILTER (WHERE is_tool_call AND result_status = 'malformed') AS results_malformed,
       count(*) FILTER (WHERE is_tool_call AND result_status IN ('judged', 'text')) AS results_judged,
       count(*) FILTER (WHERE is_tool_call AND arguments_hash IS NULL) AS without_arguments,
       count(*) FILTER (WHERE is_tool_call AND arguments_status IN ('too_large', 'malformed')) AS arguments_skipped,
       count(*) FILTER (WHERE is_tool_call AND tool_name_source = 'span name') AS named_from_span,
       count(*) FILTER (WHERE is_tool_call AND call_id_source = 'parent LLM span') AS call_id_from_parent,
       count(*) FILTER (WHERE function_span AND NOT is_tool_call) AS function_spans,
       count(*) FILTER (WHERE around_ours) AS around_ours,
       count(*) FILTER (WHERE is_tool_call AND call_id IS NULL) AS without_call_id,
       count(*) FILTER (WHERE is_tool_call AND error_type_source = $from_event) AS error_type_from_event
FROM peer_spans
GROUP BY span_format ORDER BY span_format NULLS LAST
"""
_KIND_FROM = {c.KIND_SOURCE_FROM_NAME: "tool kind from the name",
              c.KIND_SOURCE_FROM_ARGUMENTS: "tool kind from the arguments",
              c.KIND_SOURCE_INFERRED: "tool kind from the attributes"}
_NOT_UNDERSTOOD_SQL = """
SELECT span_format, not_understood, count(*) FROM peer_spans
WHERE not_understood IS NOT NULL GROUP BY ALL ORDER BY ALL
"""
_RUNS_SQL = """
SELECT span_format, run_source, count(*) FROM peer_spans WHERE is_tool_call GROUP BY ALL ORDER BY ALL
"""


@dataclass
class FormatCounts:
    """One format's part of the evidence (see the module docstring)."""

    name: str
    spans: int = 0
    tool_calls: int = 0
    without_result: int = 0
    results_judged: int = 0
    results_too_large: int = 0
    results_malformed: int = 0
    without_arguments: int = 0
    arguments_skipped: int = 0
    without_call_id: int = 0
    not_understood: dict[str, int] = field(default_factory=dict)
    inferred: dict[str, int] = field(default_factory=dict)
    kind_undecided: int = 0
    around_ours: int = 0
    """Tool spans around a call our decorator recorded too: the call is read from our span."""

    @property
    def content_setting(self) -> str:
        if self.name == c.FORMAT_SELECTED:
            return _SELECTED_CONTENT
        fmt = _BY_NAME.get(self.name)
        return fmt.content_setting if fmt is not None else ""

    @property
    def cannot_tell(self) -> str:
        if self.name == c.FORMAT_SELECTED:
            return _SELECTED_CANNOT_TELL
        fmt = _BY_NAME.get(self.name)
        return fmt.cannot_tell if fmt is not None else ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"spans": self.spans, "tool_calls": self.tool_calls}
        if self.name == c.FORMAT_OURS:
            return out
        out.update({
            "not_understood": dict(self.not_understood),
            "without_result": self.without_result,
            "content_setting": self.content_setting,
            "results": {"judged": self.results_judged, "too_large_skipped": self.results_too_large,
                        "malformed_skipped": self.results_malformed},
            "without_arguments": self.without_arguments,
            "arguments_skipped": self.arguments_skipped,
            "without_call_id": self.without_call_id,
            "inferred": dict(self.inferred),
            "tool_kind_undecided": self.kind_undecided,
            "around_our_tool_spans": self.around_ours,
            "cannot_tell": self.cannot_tell,
        })
        return out

    def render(self) -> list[str]:
        """Lines for the text report (indented under ``span formats:``)."""
        if self.name == c.FORMAT_OURS:
            return [f"    {self.name}: {self.tool_calls:,} tool call(s)"]
        head = f"    {self.name}: {self.spans:,} span(s), {self.tool_calls:,} tool call(s) recognised"
        if self.tool_calls:
            head += (f"; results judged {self.results_judged:,}, without a result {self.without_result:,}, "
                     f"too large {self.results_too_large:,}, malformed {self.results_malformed:,} (skipped)")
        out = [head]
        if self.without_result:
            out.append(f"      {self.without_result:,} call(s) without a recorded result: {self.content_setting}")
        if self.inferred:
            out.append("      inferred: " + ", ".join(f"{what} {n:,}" for what, n in sorted(self.inferred.items())))
        if self.kind_undecided:
            out.append(f"      tool kind undecided (name and arguments say nothing): {self.kind_undecided:,}")
        if self.around_ours:
            out.append(f"      around our own tool spans (the call is read from ours): {self.around_ours:,}")
        for reason, n in sorted(self.not_understood.items()):
            out.append(f"      not understood: {n:,} ({reason})")
        if self.tool_calls and self.cannot_tell:
            out.append(f"      cannot tell: {self.cannot_tell}")
        return out


@dataclass
class FormatEvidence:
    """Every source format's counts, and the function spans nothing selected."""

    formats: dict[str, FormatCounts] = field(default_factory=dict)
    unselected_function_spans: int = 0
    shape_failures: int = 0
    """Distinct recorded results on which a ``--result-shape`` function raised (the built-in rules then decided)."""

    @property
    def peer_tool_calls(self) -> int:
        return sum(f.tool_calls for name, f in self.formats.items() if name != c.FORMAT_OURS)

    def names(self) -> list[str]:
        """The formats with tool calls, ours first."""
        return [name for name, f in self.formats.items() if f.tool_calls]

    def as_dict(self) -> dict[str, Any]:
        return {"formats": {name: f.as_dict() for name, f in self.formats.items()},
                "function_spans_not_selected": self.unselected_function_spans,
                "result_shape_failures": self.shape_failures}

    def warnings(self) -> list[str]:
        out = []
        if self.unselected_function_spans:
            out.append(f"{self.unselected_function_spans:,} span(s) look like function spans ({c.CODE_FUNCTION}, "
                       f"e.g. logfire's @instrument) but no format marks them as tool calls: none was judged; "
                       + HOW_TO_SELECT)
        for f in self.formats.values():
            if f.without_result and f.tool_calls:
                out.append(f"{f.without_result:,} of {f.tool_calls:,} {f.name} tool call(s) have no recorded result, "
                           f"so their outcome is unknown: {f.content_setting}")
            skipped = f.results_too_large + f.results_malformed
            if skipped:
                out.append(f"{skipped:,} {f.name} result(s) skipped unread ({f.results_too_large:,} longer than "
                           f"{c.MAX_RECORDED_RESULT_CHARS:,} characters, {f.results_malformed:,} malformed)")
            for reason, n in sorted(f.not_understood.items()):
                out.append(f"{n:,} {f.name} span(s) not understood: {reason}")
        if self.shape_failures:
            out.append(f"a --result-shape function raised on {self.shape_failures:,} result(s); the built-in rules "
                       "decided those")
        return out

    def render(self) -> list[str]:
        lines = ["  span formats:"] + [line for f in self.formats.values() for line in f.render()]
        if self.unselected_function_spans:
            lines.append(f"    function spans no format marks ({c.CODE_FUNCTION}): {self.unselected_function_spans:,}, "
                         "none judged; " + HOW_TO_SELECT)
        if len(lines) == 1:
            lines[0] += " no tool calls recognised"
        return lines


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    return list(con.execute(sql).fetchall())


def gather_formats(con: duckdb.DuckDBPyConnection, shape_failures: int = 0,
                   kinds: Sequence[tuple[Any, Any, int]] = (), ours: int = 0) -> FormatEvidence:
    """The per-format evidence over the loaded spans in ``con`` (``finish_load`` must have run);
    ``kinds``: (format, tool_kind_source, count) of other instrumentations' tool calls and
    ``ours``: our own tool spans, both from the scans the evidence makes of ``spans`` anyway."""
    out = FormatEvidence(shape_failures=shape_failures)
    if ours:
        out.formats[c.FORMAT_OURS] = FormatCounts(c.FORMAT_OURS, spans=int(ours), tool_calls=int(ours))
    result = con.execute(_PEER_SQL, {"from_event": c.ERROR_TYPE_FROM_EVENT})
    columns = [d[0] for d in result.description]
    for row in result.fetchall():
        v = dict(zip(columns, row))
        out.unselected_function_spans += int(v["function_spans"])
        if v["span_format"] is None:  # function spans no format marks
            continue
        name = str(v["span_format"])
        out.formats[name] = FormatCounts(
            name, spans=int(v["spans"]), tool_calls=int(v["tool_calls"]), without_result=int(v["without_result"]),
            results_judged=int(v["results_judged"]), results_too_large=int(v["results_too_large"]),
            results_malformed=int(v["results_malformed"]), without_arguments=int(v["without_arguments"]),
            arguments_skipped=int(v["arguments_skipped"]), without_call_id=int(v["without_call_id"]),
            around_ours=int(v["around_ours"]))
        f = out.formats[name]
        if v["named_from_span"]:
            f.inferred["tool name from the span name"] = int(v["named_from_span"])
        if v["call_id_from_parent"]:
            f.inferred["call id from the parent LLM span"] = int(v["call_id_from_parent"])
        if v["error_type_from_event"]:
            f.inferred["error type from the exception event"] = int(v["error_type_from_event"])
    for name, reason, n in _count(con, _NOT_UNDERSTOOD_SQL):
        out.formats.setdefault(str(name), FormatCounts(str(name))).not_understood[str(reason)] = int(n)
    for name, source, n in _count(con, _RUNS_SQL):
        what = "run id from the trace id" if source == "trace id" else f"run id from {source}"
        out.formats[str(name)].inferred[what] = int(n)
    for name, source, n in kinds:
        counts = out.formats.get(str(name))
        if counts is None or counts.name == c.FORMAT_OURS:
            continue
        kind_from = _KIND_FROM.get(str(source))
        if kind_from is not None:
            counts.inferred[kind_from] = counts.inferred.get(kind_from, 0) + int(n)
        elif source in (c.KIND_SOURCE_UNDECIDED, c.KIND_SOURCE_AMBIGUOUS):
            counts.kind_undecided += int(n)
    return out

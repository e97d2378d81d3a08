"""The span-format layer (``queries/spans.sql`` after its marker, ``telemetry/forensics/_peers.py``):
each format's tool spans read into the ``spans`` columns, on the small fixtures of
``peer_fixtures/`` and on variants built to probe one rule each; hostile content; the options."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import peer_story
import pytest
from peer_story import FORMAT_NAMES, SELECTED_GLOB, fixture, line, span

from telemetry import conventions as c
from telemetry._span_formats import FORMATS, tool_call_of
from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import Forensics, open_traces
from telemetry.forensics._cli import main as forensics_main
from telemetry.forensics._peers import ToolSpanSelector, arguments_facts, judge_result, parse_tool_spans
from telemetry.forensics._questions import CONTENT_COLUMNS, NEEDS, QUESTION_NAMES
from telemetry.runtime._resources import data_file

from forensics_builder import hex_id

SQL = data_file("queries", "spans.sql").read_text(encoding="utf-8")


def write(tmp_path: Path, spans: list[dict[str, Any]], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(line(spans) + "\n", encoding="utf-8")
    return path


def rows(traces: Forensics, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    result = traces.connection.execute(sql, params or [])
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, r)) for r in result.fetchall()]


def genai_tool(trace: str, serial: int, tool: str, **attributes: Any) -> dict[str, Any]:
    status = attributes.pop("status", 0)
    return span(trace, f"{c.SPAN_NAME_PREFIX}{tool}", serial, float(serial),
                {c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: tool, **attributes},
                status=status)


# --- the SQL reads what span_formats describes --------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_sql_reads_every_key_span_formats_names(fmt: Any) -> None:
    """Each format's marker (key and value) and every key of its tool name, arguments, result, call
    id, run and agent are read by spans.sql, spelled as conventions and span_formats spell them."""
    assert f"attribute_values[list_position(attribute_keys, '{fmt.marker}')]" in SQL
    assert re.search(rf"m_{fmt.name} = '{re.escape(fmt.marker_value)}' THEN '{fmt.name}'", SQL), fmt.name
    for key in fmt.tool_name + fmt.arguments + fmt.result + fmt.call_id + fmt.run + fmt.agent:
        assert f"attribute_values[list_position(attribute_keys, '{key}')]" in SQL, (fmt.name, key)


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if f != c.FORMAT_SELECTED])
def test_the_sql_and_span_formats_read_a_tool_span_alike(fmt: str) -> None:
    """tool_call_of (the Python reading, for observe_tool_spans and the audit) and the SQL give every
    fixture tool span the same format, tool name, run and agent, and (where the span has one) call id
    (OpenLLMetry's run is the enclosing workflow span, which only the SQL sees)."""
    text = fixture(fmt).read_text(encoding="utf-8")
    expected = {}
    for data in map(json.loads, text.splitlines()):
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in s.get("attributes", [])}
                    call = tool_call_of(s["name"], attrs)
                    if call is not None:
                        expected[s["spanId"]] = call
    assert len(expected) == 4
    with open_traces([fixture(fmt)]) as traces:
        got = {r["span_id"]: r for r in rows(traces, "SELECT * FROM peer_spans WHERE is_tool_call")}
        assert set(got) == set(expected)
        for span_id, call in expected.items():
            row = got[span_id]
            assert (row["span_format"], row["tool_name"], row["agent_id"]) == (call.format, call.tool_name, call.agent_id)
            if fmt == c.FORMAT_TRACELOOP:  # the run is the workflow span around it: no one span says it
                assert row["run_source"] == "workflow span" and call.run_id is None
            else:
                assert row["run_id"] == call.run_id
            if call.call_id is not None:
                assert row["call_id"] == call.call_id


def test_every_column_of_the_view_is_in_the_header_and_every_new_one_in_conventions() -> None:
    """The header comment of spans.sql stays true: it names every column of ``spans``."""
    header = SQL.split("-- Columns (one row per span):")[1].split("-- Example:")[0]
    header = header.replace("state_version_read/expected/current/written", " ".join(
        f"state_version_{v}" for v in ("read", "expected", "current", "written")))
    with open_traces([fixture(c.FORMAT_GENAI)]) as traces:
        columns = [r[0] for r in traces.connection.execute("DESCRIBE spans").fetchall()]
    for column in columns:
        assert re.search(rf"\b{column}\b", header), column
    for name in ("COLUMN_SPAN_FORMAT", "COLUMN_RESULT_STATUS", "COLUMN_ARGUMENTS_HASH", "COLUMN_ARGUMENTS_KEYED",
                 "COLUMN_TOOL_CALL_ID", "COLUMN_TOOL_KIND_SOURCE"):
        assert getattr(c, name) in columns
    assert set(NEEDS) == set(QUESTION_NAMES)
    for needs in NEEDS.values():
        assert set(needs.all_of + needs.any_of) <= set(columns)


# --- what the layer infers, and from what -------------------------------------------------------


def test_openinference_takes_the_call_id_from_the_llm_span_that_asked_for_it(tmp_path: Path) -> None:
    """Matched by tool name and order; an id on the tool span itself wins; the evidence says how many."""
    spans = peer_story.openinference("oi2")
    tools = [s for s in spans if any(a["key"] == c.OI_TOOL_NAME for a in s["attributes"])]
    tools[0]["attributes"].append({"key": c.OI_TOOL_CALL_ID, "value": {"stringValue": "own-id"}})
    with open_traces([write(tmp_path, spans)]) as traces:
        got = rows(traces, "SELECT tool_name, tool_call_id FROM spans WHERE span_format = 'openinference' "
                           "ORDER BY start_time_unix_nano")
        assert [r["tool_call_id"] for r in got] == ["own-id", "call_oi2_1", "call_oi2_2", "call_oi2_3"]
        inferred = traces.evidence.formats.formats[c.FORMAT_OPENINFERENCE].inferred
        assert inferred["call id from the parent LLM span"] == 3 and inferred["run id from session.id"] == 4


def test_transport_comes_from_the_status_error_type_and_strands_tool_status(tmp_path: Path) -> None:
    trace = hex_id("trace:transport", 32)
    spans = [genai_tool(trace, 1, "charge", status=2, **{c.GEN_AI_TOOL_CALL_RESULT: '{"ok": true}'}),
             genai_tool(trace, 2, "charge", **{c.ERROR_TYPE: "TimeoutError"}),
             genai_tool(trace, 3, "charge", **{c.GEN_AI_TOOL_STATUS: "error"}),
             genai_tool(trace, 4, "charge", **{c.GEN_AI_TOOL_CALL_RESULT: '{"ok": true}'})]
    with open_traces([write(tmp_path, spans)]) as traces:
        got = rows(traces, "SELECT transport, outcome, readback FROM spans ORDER BY start_time_unix_nano")
    assert [(r["transport"], r["outcome"]) for r in got] == [
        (c.TRANSPORT_ERROR, c.OUTCOME_ERROR), (c.TRANSPORT_ERROR, "timeout_error"),
        (c.TRANSPORT_ERROR, c.OUTCOME_ERROR), (c.TRANSPORT_OK, c.OUTCOME_OK)]
    assert {r["readback"] for r in got} == {c.READBACK_UNKNOWN}


def raised_spans(trace: str) -> list[dict[str, Any]]:
    """A tool span that raised with its status left UNSET (only an ``exception`` event says so),
    one with another event, and one with none."""
    ok = {c.GEN_AI_TOOL_CALL_RESULT: '{"ok": true}'}
    spans = [genai_tool(trace, 1, "charge"), genai_tool(trace, 2, "charge", **ok), genai_tool(trace, 3, "charge", **ok)]
    at = spans[0]["startTimeUnixNano"]
    spans[0]["events"] = [{"timeUnixNano": at, "name": "exception",
                           "attributes": [{"key": "exception.type", "value": {"stringValue": "TimeoutError"}}]}]
    spans[1]["events"] = [{"timeUnixNano": at, "name": "retry"}]
    return spans


def test_an_exception_event_on_an_unset_span_is_a_transport_error(tmp_path: Path) -> None:
    """JSON lines, Parquet from ``ingest``, and Parquet an older ``ingest`` wrote (no column for it)."""
    from telemetry.forensics import ingest

    trace = hex_id("trace:raised", 32)
    path = write(tmp_path, raised_spans(trace))
    expected = [(c.TRANSPORT_ERROR, "timeout_error"), (c.TRANSPORT_OK, c.OUTCOME_OK), (c.TRANSPORT_OK, c.OUTCOME_OK)]
    sql = "SELECT transport, outcome FROM spans ORDER BY start_time_unix_nano"
    with open_traces([path]) as traces:
        assert [(r["transport"], r["outcome"]) for r in rows(traces, sql)] == expected
        assert "raised" not in [d[0] for d in traces.connection.execute("SELECT * FROM spans LIMIT 0").description]
    ingest([path], tmp_path / "pq")
    with open_traces([tmp_path / "pq"]) as parts, open_traces([path, tmp_path / "pq"]) as both:
        assert [(r["transport"], r["outcome"]) for r in rows(parts, sql)] == expected
        assert [(r["transport"], r["outcome"]) for r in rows(both, sql)] == expected  # copies counted once
    import duckdb

    older = tmp_path / "older"
    older.mkdir()
    for part in (tmp_path / "pq").rglob("*.parquet"):
        with duckdb.connect() as con:
            # as an older ingest wrote them: no raised column, error_type from error.type alone
            con.execute("COPY (SELECT * EXCLUDE (raised) REPLACE (attribute_values[list_position(attribute_keys, "
                        "'error.type')] AS error_type) FROM read_parquet(?)) TO '" + str(older / part.name)
                        + "' (FORMAT parquet)", [str(part)]).fetchall()
    with open_traces([older]) as old, open_traces([path, older]) as mixed:
        # no exception events in those parts: the call that raised has no recorded result, so no outcome
        assert [(r["transport"], r["outcome"]) for r in rows(old, sql)] == [(c.TRANSPORT_OK, None)] + expected[1:]
        assert len(rows(mixed, sql)) == 3


def test_a_call_without_a_recorded_result_is_counted_with_the_setting_that_records_it(tmp_path: Path) -> None:
    trace = hex_id("trace:absent", 32)
    spans = [genai_tool(trace, n, "refund", **{c.GEN_AI_CONVERSATION_ID: "conv"}) for n in (1, 2)]
    with open_traces([write(tmp_path, spans)]) as traces:
        assert rows(traces, "SELECT DISTINCT result_status, outcome, arguments_hash FROM spans "
                            "WHERE tool_name IS NOT NULL") == [
            {"result_status": "absent", "outcome": None, "arguments_hash": None}]
        counts = traces.evidence.formats.formats[c.FORMAT_GENAI]
        assert counts.without_result == 2 and counts.without_arguments == 2
        warning = next(w for w in traces.evidence.warnings() if "no recorded result" in w)
        assert "include_content=True" in warning and "CAPTURE_MESSAGE_CONTENT" in warning
        assert traces.evidence.not_judged("masked_failures") and traces.evidence.not_judged("repeated_executions")
        assert any("without a recorded result" in note for note in traces.evidence.caveats("masked_failures"))
        assert traces.run("masked_failures") == [] and traces.run("repeated_executions") == []


def test_repeated_executions_leave_out_reads_keyed_calls_and_other_runs(tmp_path: Path) -> None:
    trace = hex_id("trace:repeats", 32)
    args = json.dumps({"order_id": "o-9"})
    keyed = json.dumps({"order_id": "o-9", "request_id": "r-1"})
    spans = []
    for n, (tool, arguments, run) in enumerate([("lookup_order", args, "a"), ("lookup_order", args, "a"),
                                                ("refund", keyed, "a"), ("refund", keyed, "a"),
                                                ("send_receipt", args, "a"), ("send_receipt", args, "b")]):
        spans.append(genai_tool(trace, n, tool, **{c.GEN_AI_TOOL_CALL_ARGUMENTS: arguments,
                                                   c.GEN_AI_CONVERSATION_ID: run}))
    spans.append(genai_tool(trace, 9, "send_receipt", **{c.GEN_AI_TOOL_CALL_ARGUMENTS: ' {"order_id" : "o-9"}',
                                                         c.GEN_AI_CONVERSATION_ID: "a"}))
    with open_traces([write(tmp_path, spans)]) as traces:
        got = traces.run("repeated_executions")
        assert [(r["run_id"], r["tool_name"], r["calls"], r["tool_kind"]) for r in got] == [
            ("a", "send_receipt", 2, c.KIND_SEND)]
        kinds = dict(traces.connection.execute(
            "SELECT DISTINCT tool_name, tool_kind_source FROM spans WHERE tool_name IS NOT NULL").fetchall())
        assert kinds == {"lookup_order": c.KIND_SOURCE_FROM_NAME, "refund": c.KIND_SOURCE_UNDECIDED,
                         "send_receipt": c.KIND_SOURCE_FROM_NAME}


def test_the_kind_can_come_from_the_arguments(tmp_path: Path) -> None:
    trace = hex_id("trace:kinds", 32)
    spans = [genai_tool(trace, 1, "apply", **{c.GEN_AI_TOOL_CALL_ARGUMENTS: '{"doc": "d", "expected_version": "v3"}'})]
    with open_traces([write(tmp_path, spans)]) as traces:
        assert rows(traces, "SELECT tool_kind, tool_kind_source FROM spans") == [
            {"tool_kind": c.KIND_WRITE, "tool_kind_source": c.KIND_SOURCE_FROM_ARGUMENTS}]


def test_our_own_span_with_a_failed_outcome_and_an_unset_status_is_a_masked_failure(tmp_path: Path) -> None:
    """On our own spans the decorator sets ERROR for every outcome that is not ok: a row exposes a gap."""
    trace = hex_id("trace:ours", 32)
    ours = span(trace, f"{c.SPAN_NAME_PREFIX}charge", 1, 1.0, {
        c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: "charge", c.TOOL_TRANSPORT: c.TRANSPORT_OK,
        c.TOOL_OUTCOME: c.OUTCOME_TOOL_ERROR, c.TOOL_KIND: c.KIND_WRITE, c.TOOL_READBACK: c.READBACK_SKIPPED})
    told = span(trace, f"{c.SPAN_NAME_PREFIX}charge", 2, 2.0, {
        c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: "charge", c.TOOL_TRANSPORT: c.TRANSPORT_OK,
        c.TOOL_OUTCOME: c.OUTCOME_TOOL_ERROR, c.TOOL_KIND: c.KIND_WRITE}, status=0)
    told["status"] = {"code": 2, "message": "tool_error"}
    with open_traces([write(tmp_path, [ours, told])]) as traces:
        got = traces.run("masked_failures")
        assert [(r["span_format"], r["tool_name"], r["calls"]) for r in got] == [(c.FORMAT_OURS, "charge", 1)]
        assert traces.evidence.formats.names() == [c.FORMAT_OURS]


def test_a_paused_call_shown_green_is_not_a_masked_failure(tmp_path: Path) -> None:
    """A call that paused for a human or for later (deferred, approval_required) is not a failure,
    whatever its status; the query's list of outcomes that are not failures is conventions' list."""
    from telemetry.runtime._resources import data_file

    sql = data_file("queries", "masked_failures.sql").read_text()
    listed = set(re.findall(r"'([a-z_]+)'", sql.split("outcome NOT IN (")[1].split(")")[0]))
    assert listed == c.NOT_MASKABLE_OUTCOMES
    trace = hex_id("trace:paused", 32)
    spans = [span(trace, f"{c.SPAN_NAME_PREFIX}refund", n, float(n), {
        c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: "refund", c.TOOL_TRANSPORT: c.TRANSPORT_OK,
        c.TOOL_OUTCOME: outcome, c.TOOL_KIND: c.KIND_WRITE, c.TOOL_READBACK: c.READBACK_SKIPPED})
        for n, outcome in enumerate(sorted(c.PAUSED_OUTCOMES) + [c.OUTCOME_TOOL_ERROR], start=1)]
    with open_traces([write(tmp_path, spans)]) as traces:
        assert [(r["outcome"], r["calls"]) for r in traces.run("masked_failures")] == [(c.OUTCOME_TOOL_ERROR, 1)]


# --- --tool-spans and the function spans nothing marks ------------------------------------------


def test_function_spans_nothing_selected_are_counted_with_how_to_select_them(capsys: pytest.CaptureFixture[str]) -> None:
    forensics_main(["report", str(fixture(c.FORMAT_SELECTED)), "-q"])
    text = capsys.readouterr().out
    assert "function spans no format marks (code.function): 4, none judged" in text
    assert "--tool-spans" in text and "== masked_failures" not in text
    assert "Nothing found: " not in text or "masked_failures" not in text.split("Nothing found: ")[1]


def test_a_selector_file_names_where_the_facts_are(tmp_path: Path) -> None:
    """A mapping file: match on an attribute, take the tool name, arguments, result and run from named keys."""
    trace = hex_id("trace:inhouse", 32)
    spans = [span(trace, "agent.tools.invoke", n, float(n), {
        "inhouse.kind": "tool", "inhouse.tool": tool, "inhouse.args": json.dumps(args), "inhouse.result": json.dumps(result),
        "inhouse.session": "s-1"}) for n, (tool, args, result) in enumerate(peer_story.STORY)]
    spans.append(span(trace, "agent.tools.invoke", 9, 9.0, {"inhouse.kind": "other", "inhouse.tool": "x"}))
    selector = tmp_path / "tools.json"
    selector.write_text(json.dumps({"match": {"name": "agent.tools.*", "attribute": "inhouse.kind=tool"},
                                    "tool_name": "inhouse.tool", "arguments": "inhouse.args",
                                    "result": "inhouse.result", "run": "inhouse.session"}))
    with open_traces([write(tmp_path, spans)], tool_spans=str(selector)) as traces:
        assert {(r["tool_name"], r["outcome"]) for r in traces.run("masked_failures")} == {
            ("charge", "quota_exceeded"), ("refund", "refund_window_closed")}
        assert [(r["run_id"], r["tool_name"]) for r in traces.run("repeated_executions")] == [("s-1", "refund")]
        assert traces.evidence.formats.formats[c.FORMAT_SELECTED].tool_calls == 4
    assert traces.paths[-2:] == ["--tool-spans", str(selector)]  # the rows: commands read them the same way


@pytest.mark.parametrize("content, error", [
    ("[]", "holds no selector"),
    ('{"match": {}}', '"match" must be an object'),
    ('{"match": {"name": "x"}, "colour": "red"}', "unknown key"),
    ('{"match": {"name": "x"}, "arguments": 3}', '"arguments" is an attribute name'),
    ("{not json", "cannot read it as a JSON file"),
])
def test_a_bad_selector_file_is_refused_naming_the_problem(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "sel.json"
    path.write_text(content)
    with pytest.raises(ForensicsInputError, match=re.escape(error)):
        parse_tool_spans(str(path))


def test_a_selector_matches_as_the_sql_does() -> None:
    selector = ToolSpanSelector(name="Calling *", attribute="k", value="v")
    assert selector.matches("Calling refund", {"k": "v"})
    assert not selector.matches("Calling refund", {"k": "w"}) and not selector.matches("refund", {"k": "v"})
    assert parse_tool_spans(SELECTED_GLOB) == (ToolSpanSelector(name=SELECTED_GLOB),)


# --- --result-shape -----------------------------------------------------------------------------


def test_a_result_shape_judges_recorded_results_before_the_built_in_rules(tmp_path: Path) -> None:
    """``module:function`` is imported; its code wins, None leaves the built-in rules to decide, and
    one that raises is counted."""
    module = tmp_path / "shop_shapes.py"
    module.write_text(
        "def func_result(value):\n"
        "    if isinstance(value, dict) and 'state' in value:\n"
        "        return None if value['state'] == 'paid' else 'not_paid'\n"
        "    if isinstance(value, dict) and value.get('code') == 'refund_window_closed':\n"
        "        raise ValueError('a shape that breaks')\n"
        "    return None\n")
    sys.path.insert(0, str(tmp_path))
    try:
        spans = peer_story.mlflow("shape")
        outputs = next(a for a in spans[-1]["attributes"] if a["key"] == c.MLFLOW_SPAN_OUTPUTS)
        outputs["value"]["stringValue"] = json.dumps({"order_id": "o-1", "state": "open"})
        with open_traces([write(tmp_path, spans)], result_shapes="shop_shapes:func_result") as traces:
            outcomes = dict(traces.connection.execute(
                "SELECT tool_name, max(outcome) FROM spans WHERE tool_name IS NOT NULL GROUP BY 1").fetchall())
            assert outcomes == {"charge": "quota_exceeded", "refund": "refund_window_closed", "lookup_order": "not_paid"}
            assert traces.evidence.formats.shape_failures == 1  # once per distinct result text
            assert any("--result-shape function raised on 1" in w for w in traces.evidence.warnings())
        with pytest.raises(ForensicsInputError, match="no callable"):
            open_traces([fixture(c.FORMAT_MLFLOW)], result_shapes="shop_shapes:missing")
        with pytest.raises(ForensicsInputError, match="module:function"):
            open_traces([fixture(c.FORMAT_MLFLOW)], result_shapes="shop_shapes")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shop_shapes", None)


# --- hostile content ----------------------------------------------------------------------------

BREAKOUT_HTML = "</td><script>alert(1)</script>"
BREAKOUT_SQL = "'); DROP TABLE spans; --"
ANSI = "\x1b[2J\x1b[31mred"


def test_a_huge_result_and_malformed_wrappers_are_counted_and_skipped(tmp_path: Path) -> None:
    trace = hex_id("trace:hostile", 32)
    huge = json.dumps({"success": False, "blob": "x" * 10_000_000})
    results = [huge, '{"success": false, "error": "quota_ex', '{"lc": 1, "id": ["langchain", "schema", "messages", '
               '"ToolMessage"], "kwargs": "not a mapping"}', "[" * 50_000, '"' + "\\" * 999 + '"',
               json.dumps({"type": "tool", "data": {"content": "[[[", "status": "error"}})]
    spans = [genai_tool(trace, n, "charge", **{c.GEN_AI_TOOL_CALL_RESULT: r,
                                               c.GEN_AI_TOOL_CALL_ARGUMENTS: r if n else '{"order_id": "o-1"}'})
             for n, r in enumerate(results)]
    with open_traces([write(tmp_path, spans)]) as traces:
        got = [r["result_status"] for r in rows(traces, "SELECT result_status FROM spans ORDER BY start_time_unix_nano")]
        assert got[0] == "too_large" and got[1] == c.RESULT_MALFORMED and got[3] == c.RESULT_MALFORMED
        counts = traces.evidence.formats.formats[c.FORMAT_GENAI]
        assert counts.results_too_large == 1 and counts.results_malformed >= 2 and counts.tool_calls == len(results)
        assert any("skipped unread" in w for w in traces.evidence.warnings())
        traces.report().render()  # every question and the report run over them


def test_the_verdict_functions_never_raise() -> None:
    for text in ["", "{", "[" * 100_000, '{"a": ' * 10_000, "\x00\ud800", "9" * 5000, json.dumps({"lc": 1, "id": None})]:
        status, _ = judge_result(text)
        assert status in ("judged", "text", "absent", "too_large", "malformed")
        facts = arguments_facts(text)
        assert facts is not None and facts[0] in ("judged", "text", "too_large", "malformed")


def test_hostile_names_stay_inert_in_sql_text_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Tool names, results and selector values built to break out: SQL binds them (spans survives), the
    text report shows escapes instead of acting on them, HTML escapes them, JSON encodes them."""
    trace = hex_id("trace:breakout", 32)
    failure = json.dumps({"success": False, "error": "quota_exceeded", "note": BREAKOUT_HTML + BREAKOUT_SQL + ANSI})
    spans = [genai_tool(trace, n, name, **{c.GEN_AI_TOOL_CALL_RESULT: failure, c.GEN_AI_TOOL_CALL_ARGUMENTS: failure,
                                           c.GEN_AI_CONVERSATION_ID: BREAKOUT_SQL})
             for n, name in enumerate([BREAKOUT_HTML, BREAKOUT_SQL, ANSI + "charge", BREAKOUT_SQL])]
    spans.append(span(trace, BREAKOUT_SQL, 7, 7.0, {c.CODE_FUNCTION: BREAKOUT_HTML, "return": failure}))
    path = write(tmp_path, spans)
    page = tmp_path / "r.html"
    args = ["report", str(path), "-q", "--tool-spans", BREAKOUT_SQL, "--tool-spans", "'*", "--show-content"]
    assert forensics_main(args + ["--html", str(page)]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\\x1b[2J" in text
    html = page.read_text()
    assert "<script>" not in html and "&lt;/td&gt;&lt;script&gt;" in html
    assert forensics_main(args + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    masked = {r["tool_name"] for q in doc["questions"] if q["question"] == "masked_failures" for r in q["examples"]}
    assert masked == {BREAKOUT_HTML, BREAKOUT_SQL, ANSI + "charge"}
    with open_traces([path], tool_spans=[BREAKOUT_SQL]) as traces:
        assert traces.connection.execute("SELECT count(*) FROM spans").fetchall()[0][0] == 5
        assert traces.evidence.formats.formats[c.FORMAT_SELECTED].tool_calls == 1
        repeated = traces.run("repeated_executions")
        assert [(r["run_id"], r["tool_name"], r["calls"]) for r in repeated] == [(BREAKOUT_SQL, BREAKOUT_SQL, 2)]
        assert not CONTENT_COLUMNS & set(repeated[0])


def test_show_content_is_off_by_default_in_the_relation_too() -> None:
    """Without show_content the content columns are NULL in the SQL itself, not only left out of rows."""
    with open_traces([fixture(c.FORMAT_LANGFUSE)]) as traces:
        assert traces.connection.execute("SELECT count(result_shown) + count(arguments_shown) FROM spans").fetchall() == [(0,)]
        assert "example_result" not in traces.columns("masked_failures")
    with open_traces([fixture(c.FORMAT_LANGFUSE)], show_content=True) as traces:
        assert traces.connection.execute("SELECT count(result_shown) FROM spans").fetchall() == [(4,)]
        assert "quota_exceeded" in traces.run("masked_failures")[-1]["example_result"]


def test_the_docs_page_says_what_each_format_cannot_tell_and_how_to_turn_content_on() -> None:
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "peer-traces.md").read_text().split())
    for fmt in FORMATS:
        assert f"`{fmt.name}`: {fmt.cannot_tell}" in page, fmt.name
        assert " ".join(fmt.content_setting.split()).lower() in page.lower(), fmt.name
    for option in ("--tool-spans", "--result-shape", "--show-content"):
        assert f"## `{option}" in page


def test_each_recorded_result_is_judged_once_however_many_columns_read_the_verdict(tmp_path: Path) -> None:
    """The layer calls its functions once per peer tool span (a shape sees every distinct result
    once), never per question or per column, and never for a span without a result."""
    seen: list[Any] = []

    def counting(value: Any) -> None:
        seen.append(value)
        return None

    trace = hex_id("trace:once", 32)
    spans = [genai_tool(trace, n, "refund", **{c.GEN_AI_TOOL_CALL_RESULT: json.dumps({"ok": True, "n": n})})
             for n in range(5)] + [genai_tool(trace, 9, "refund")]
    with open_traces([write(tmp_path, spans)], result_shapes=[counting]) as traces:
        traces.report()
        traces.run("masked_failures")
    assert sorted(v["n"] for v in seen) == [0, 1, 2, 3, 4]


def test_a_framework_span_around_one_of_ours_is_not_a_second_call(tmp_path: Path) -> None:
    """pydantic-ai's execute_tool span around a tool our decorator instrumented: the call is ours
    (its child span says so), so the framework's span is no tool call of its own, and counted."""
    trace = hex_id("trace:around", 32)
    outer = genai_tool(trace, 1, "refund", **{c.GEN_AI_TOOL_CALL_RESULT: json.dumps(peer_story.REFUND_RESULT)})
    inner = span(trace, f"{c.SPAN_NAME_PREFIX}refund", 2, 1.0, {
        c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: "refund", c.TOOL_TRANSPORT: c.TRANSPORT_OK,
        c.TOOL_OUTCOME: "refund_window_closed", c.TOOL_KIND: c.KIND_WRITE}, parent=outer["spanId"])
    inner["status"] = {"code": 2, "message": "refund_window_closed"}
    with open_traces([write(tmp_path, [outer, inner])]) as traces:
        assert rows(traces, "SELECT span_format, tool_name FROM spans WHERE tool_name IS NOT NULL") == [
            {"span_format": c.FORMAT_OURS, "tool_name": "refund"}]
        assert traces.evidence.formats.formats[c.FORMAT_GENAI].around_ours == 1
        assert traces.run("masked_failures") == []

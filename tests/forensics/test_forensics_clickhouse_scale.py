"""ClickHouse at table scale: every read of ``otel_traces`` is bounded by the padded window, the
exporter's lookup table widens it to whole traces, peer tool spans come with their keys, and a row
too large to bring is refused or skipped, never cut.

The index test reads ``EXPLAIN indexes = 1`` of the generated select (the main read) and the rows
chDB says every read of the query took (the runs picked, their tool spans' parent ids,
the rows, the lookup), on a five-day table with small granules (the exporter's 8192-row granules
would need millions of rows to show one skipped).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.exceptions import ClickHouseBadRows
from telemetry.forensics.clickhouse import ReadWindow, attribute_keys, spans_select
from telemetry.forensics.clickhouse._select import LOOKUP_SUFFIX, MAX_ROW_BYTES, RUN_PADDING_NS

from clickhouse_support import create, exporter_rows, insert_rows
from forensics_builder import hex_id, otlp_span_json, service_line
from test_forensics_clickhouse import client_for, engine_kept_up, open_ch  # noqa: F401  (autouse fixture)

DAY = 86400 * 10**9
HOUR = 3600 * 10**9
DAYS, PER_DAY, SPAN_NAMES = 5, 5000, 3
LOOKUP = "otel_traces" + LOOKUP_SUFFIX


@pytest.fixture(scope="module")
def multiday(chdb_dir: Path) -> Iterator[tuple[str, int]]:
    """``(database, start)``: five days of tool spans (runs of ten, three span names) from two days
    ago, in 64-row granules, with the exporter's lookup table filled by its view."""
    database = f"otel_{os.getpid()}_multiday"
    start = time.time_ns() // DAY * DAY - 2 * DAY
    step = DAY // PER_DAY
    client = client_for(chdb_dir)
    try:
        create(client, database, lookup=True, granularity=64)
        client.command(
            f"INSERT INTO {database}.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, "
            "ServiceName, SpanAttributes, Duration, StatusCode) "
            f"SELECT fromUnixTimestamp64Nano(toInt64({start} + number * {step})), "
            "lower(hex(MD5(toString(intDiv(number, 10))))), substring(lower(hex(MD5(toString(number)))), 1, 16), '', "
            f"concat('execute_tool t', toString(number % {SPAN_NAMES})), 'Internal', 'crew', "
            "map({run:String}, concat('run-', toString(intDiv(number, 10))), {tool:String}, 't', {kind:String}, 'read'), "
            f"1000, 'Unset' FROM numbers({DAYS * PER_DAY})",
            parameters={"run": c.GEN_AI_CONVERSATION_ID, "tool": c.GEN_AI_TOOL_NAME, "kind": c.TOOL_KIND})
    finally:
        client.close()
    yield database, start


def _session(chdb_dir: Path) -> Any:
    import chdb.session

    return chdb.session.Session(str(chdb_dir))  # type: ignore[no-untyped-call]


def _bound(sql: str, parameters: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """``sql`` and its parameters in the text form the HTTP interface carries them in."""
    from clickhouse_connect.driver.binding import bind_query

    query, bound = bind_query(sql, parameters)
    assert isinstance(query, str)
    return query, {name.removeprefix("param_"): value for name, value in bound.items()}


def _granules(session: Any, sql: str, parameters: dict[str, str]) -> tuple[int, int]:
    """(granules the main read selects, granules the table has), from ``EXPLAIN indexes = 1``."""
    plan = session.query("EXPLAIN indexes = 1 " + sql, "TSVRaw", params=parameters).bytes().decode()
    total = int(re.search(r"Granules: \d+/(\d+)", plan).group(1))  # type: ignore[union-attr]
    selected = int(re.search(r"Parts: \d+ \| Granules: (\d+)", plan).group(1))  # type: ignore[union-attr]
    return selected, total


def _rows_read(session: Any, sql: str, parameters: dict[str, str]) -> int:
    """Rows every read of the query took from storage (scalar subqueries and sets included)."""
    return int(session.query(sql, "Null", params=parameters).storage_rows_read())


@pytest.mark.parametrize("lookup", [None, LOOKUP], ids=["primary key", "lookup table"])
def test_a_window_of_a_fifth_of_the_table_reads_a_fifth_of_it_and_the_padding(
        chdb_dir: Path, multiday: tuple[str, int], lookup: str) -> None:
    database, start = multiday
    window = ReadWindow(start + 2 * DAY, start + 3 * DAY)
    share = (window.until_ns - window.since_ns + 2 * window.padding_ns) / (DAYS * DAY)
    session = _session(chdb_dir)
    try:
        sql, parameters = _bound(*_select(database, window, lookup))
        selected, total = _granules(session, sql, parameters)
        parts_read = 3  # the window's day and the two the padding reaches into
        assert selected <= share * total + 2 * SPAN_NAMES * parts_read, (selected, total, share)
        assert selected < total / 3
        rows = DAYS * PER_DAY
        read = _rows_read(session, sql, parameters)
        lookup_rows = rows // 10 if lookup else 0  # the lookup table: one row per trace
        # three reads of the table (runs picked, their tool spans' parent ids, the rows), each
        # at most the window and its padding (plus the granules at its edges)
        assert read <= 3 * (share * rows + 64 * 2 * SPAN_NAMES * parts_read) + lookup_rows, (read, rows)
        whole = _bound(*_select(database, ReadWindow(start - DAY, start + (DAYS + 1) * DAY), lookup))
        assert _rows_read(session, *whole) >= 3 * rows  # the same reads over the whole table
    finally:
        session.close()


def _select(database: str, window: ReadWindow, lookup: str | None) -> tuple[str, dict[str, Any]]:
    select = spans_select(database, "otel_traces", window, 10**9, lookup=lookup)
    return select.sql, select.parameters


def _rows(spans: list[tuple[str, list[dict[str, Any]]]]) -> list[list[Any]]:
    """The exporter's rows of ``(service, spans)`` groups."""
    return list(exporter_rows(service_line(service, group) for service, group in spans))


def _long_runs(now: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """A trace without a conversation id (its own run) with a tool span three hours before the
    window and one in it; a conversation of two traces that straddles the window by two hours."""
    trace = hex_id("long", 32)
    tool = {c.GEN_AI_TOOL_NAME: "lookup", c.TOOL_KIND: c.KIND_READ}
    chat = {c.GEN_AI_CONVERSATION_ID: "chat", **tool}
    return [("crew", [
        otlp_span_json(trace, hex_id("early", 16), "", now - 3 * HOUR, now - 3 * HOUR + 10**6, tool),
        otlp_span_json(trace, hex_id("late", 16), "", now, now + 10**6, tool),
        otlp_span_json(hex_id("c1", 32), hex_id("chat-early", 16), "", now - 2 * HOUR, now - 2 * HOUR + 10**6, chat),
        otlp_span_json(hex_id("c2", 32), hex_id("chat-late", 16), "", now, now + 10**6, chat),
    ])]


def _read_around(chdb_dir: Path, database: str, now: int, lookup: bool, which: set[str]) -> set[str]:
    """The span ids a one-minute window around ``now`` reads of the ``which`` spans of ``_long_runs``."""
    spans = [(service, [s for s in group if s["spanId"] in {hex_id(n, 16) for n in which}])
             for service, group in _long_runs(now)]
    client = client_for(chdb_dir)
    try:
        create(client, database, lookup=lookup)
        insert_rows(client, _rows(spans), database)
    finally:
        client.close()
    since, until = _iso(now - 60 * 10**9), _iso(now + 60 * 10**9)
    with open_ch(chdb_dir, database, last=None, since=since, until=until) as ch:
        return {r[0] for r in ch.connection.execute("SELECT span_id FROM spans").fetchall()}


@pytest.mark.parametrize("lookup", [False, True], ids=["primary key", "lookup table"])
def test_a_trace_longer_than_the_padding_is_read_whole_when_the_lookup_table_says_where_it_lies(
        chdb_dir: Path, database: str, lookup: bool) -> None:
    now = (time.time_ns() - HOUR) // 10**9 * 10**9
    assert RUN_PADDING_NS < 3 * HOUR
    read = _read_around(chdb_dir, database, now, lookup, {"early", "late"})
    assert read == ({hex_id("early", 16), hex_id("late", 16)} if lookup else {hex_id("late", 16)})


def test_a_run_of_several_traces_is_read_within_the_padding(chdb_dir: Path, database: str) -> None:
    """No table says where a conversation's traces lie: what lies beyond the padding is not read."""
    now = (time.time_ns() - HOUR) // 10**9 * 10**9
    assert RUN_PADDING_NS < 2 * HOUR
    assert _read_around(chdb_dir, database, now, True, {"chat-early", "chat-late"}) == {hex_id("chat-late", 16)}


def _iso(ns: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).isoformat()


def _peer_spans(now: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """Tool spans as other instrumentations write them, an LLM span that parents one (with its
    flattened output messages), and spans that are neither tool spans nor parents of one."""
    trace, session = hex_id("peer", 32), {c.OI_SESSION_ID: "s-1"}
    llm, chain = hex_id("llm", 16), hex_id("chain", 16)
    call_id = f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.id"
    return [("agent", [
        otlp_span_json(trace, chain, "", now, now + 9 * 10**6, {c.OPENINFERENCE_SPAN_KIND: "CHAIN", **session,
                                                                  c.OI_INPUT_VALUE: "what the user said"}),
        otlp_span_json(trace, llm, chain, now + 10**6, now + 2 * 10**6, {
            c.OPENINFERENCE_SPAN_KIND: "LLM", **session, call_id: "call_1",
            f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.role": "assistant", "llm.token_count.total": "99"}),
        otlp_span_json(trace, hex_id("oi-tool", 16), llm, now + 3 * 10**6, now + 4 * 10**6, {
            c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_TOOL, c.OI_TOOL_NAME: "refund", **session,
            c.OI_INPUT_VALUE: '{"order": 7}', c.OI_OUTPUT_VALUE: '{"status": "error"}', "other.key": "x"}),
        otlp_span_json(trace, hex_id("traceloop", 16), chain, now + 5 * 10**6, now + 6 * 10**6, {
            c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_TOOL, c.TRACELOOP_ENTITY_NAME: "charge",
            c.TRACELOOP_ENTITY_OUTPUT: '{"success": false}'}),
        otlp_span_json(trace, hex_id("mlflow", 16), chain, now + 6 * 10**6, now + 7 * 10**6, {
            c.MLFLOW_SPAN_TYPE: '"TOOL"', c.MLFLOW_SPAN_OUTPUTS: '"done"'}),
        otlp_span_json(trace, hex_id("genai", 16), chain, now + 7 * 10**6, now + 8 * 10**6, {
            c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_CALL_ARGUMENTS: "{}",
            c.GEN_AI_TOOL_CALL_RESULT: '{"ok": false}'}),
        otlp_span_json(trace, hex_id("workflow", 16), "", now, now + 10**6, {
            c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_WORKFLOW, c.TRACELOOP_WORKFLOW_NAME: "refunds"}),
        otlp_span_json(trace, hex_id("chat", 16), "", now, now + 10**6, {c.GEN_AI_OPERATION_NAME: "chat"}),
    ])]


def test_peer_tool_spans_are_read_with_the_keys_their_formats_write(chdb_dir: Path, database: str) -> None:
    now = (time.time_ns() - HOUR) // 10**9 * 10**9
    spans = _peer_spans(now)
    client = client_for(chdb_dir)
    try:
        create(client, database)
        insert_rows(client, _rows(spans), database)
    finally:
        client.close()
    keys = attribute_keys()
    wanted = set(keys.keys)
    with open_ch(chdb_dir, database) as ch:
        read = {span: dict(zip(k, v)) for span, k, v in ch.connection.execute(
            "SELECT span_id, attribute_keys, attribute_values FROM spans_loaded").fetchall()}
        assert ch.load_report.parent_spans == 2  # the LLM span and the chain span parent tool spans
    tools = {hex_id(n, 16) for n in ("oi-tool", "traceloop", "mlflow", "genai")}
    assert set(read) == tools | {hex_id("llm", 16), hex_id("chain", 16)}  # not the workflow, not the chat
    for span in spans[0][1]:
        if span["spanId"] not in read:
            continue
        written = {a["key"]: a["value"]["stringValue"] for a in span["attributes"]}
        expected = {k: v for k, v in written.items() if k in wanted or k.startswith(keys.prefixes)}
        assert read[span["spanId"]] == expected, span["spanId"]
    assert read[hex_id("llm", 16)][f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.id"] == "call_1"
    assert "llm.token_count.total" not in read[hex_id("llm", 16)] and "other.key" not in read[hex_id("oi-tool", 16)]


def test_a_peer_session_of_several_traces_is_read_whole_within_the_padding(chdb_dir: Path, database: str) -> None:
    """An OpenInference session's run is its session id (as spans.sql names it), so its tool span of
    another trace, half an hour before the window, comes with the one in it; a tool span of a
    traceloop trace (no session key in that format) half an hour before does not."""
    now = (time.time_ns() - HOUR) // 10**9 * 10**9
    oi = {c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_TOOL, c.OI_TOOL_NAME: "refund", c.OI_SESSION_ID: "s-9"}
    tl = {c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_TOOL, c.TRACELOOP_ENTITY_NAME: "charge", c.OI_SESSION_ID: "s-9"}
    half = HOUR // 2
    spans = [("agent", [
        otlp_span_json(hex_id("oi-a", 32), hex_id("oi-early", 16), "", now - half, now - half + 10**6, oi),
        otlp_span_json(hex_id("oi-b", 32), hex_id("oi-late", 16), "", now, now + 10**6, oi),
        otlp_span_json(hex_id("tl-a", 32), hex_id("tl-early", 16), "", now - half, now - half + 10**6, tl),
        otlp_span_json(hex_id("tl-b", 32), hex_id("tl-late", 16), "", now, now + 10**6, tl),
    ])]
    client = client_for(chdb_dir)
    try:
        create(client, database)
        insert_rows(client, _rows(spans), database)
    finally:
        client.close()
    since, until = _iso(now - 60 * 10**9), _iso(now + 60 * 10**9)
    with open_ch(chdb_dir, database, last=None, since=since, until=until) as ch:
        read = {r[0] for r in ch.connection.execute("SELECT span_id FROM spans").fetchall()}
    assert read == {hex_id("oi-early", 16), hex_id("oi-late", 16), hex_id("tl-late", 16)}


def _sized(now: int, sizes: dict[str, int]) -> list[tuple[str, list[dict[str, Any]]]]:
    """A tool span per entry whose output and input together hold that many bytes."""
    out = []
    for i, (name, size) in enumerate(sizes.items()):
        half = size // 2
        out.append(otlp_span_json(hex_id(name, 32), hex_id(name, 16), "", now + i * 10**6, now + i * 10**6 + 1, {
            c.GEN_AI_CONVERSATION_ID: f"run-{name}", c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_TOOL,
            c.OI_TOOL_NAME: "fetch", c.OI_INPUT_VALUE: "i" * half, c.OI_OUTPUT_VALUE: "o" * (size - half)}))
    return [("agent", out)]


def test_a_ten_megabyte_value_arrives_whole_and_a_row_past_the_limit_is_refused_or_skipped(
        chdb_dir: Path, database: str) -> None:
    """Values are fetched uncut; a row whose values add up to more than a JSON line may hold is a
    bad row (its values are not sent): the read names it, or skips and counts it when told."""
    now = (time.time_ns() - HOUR) // 10**9 * 10**9
    big, over = 10 * 1024 * 1024, MAX_ROW_BYTES + 1024
    client = client_for(chdb_dir)
    try:
        create(client, database)
        spans = _sized(now, {"small": 10, "big": big, "over": over})
        insert_rows(client, _rows(spans), database)
    finally:
        client.close()
    fetched = sum(len(a["value"]["stringValue"]) for a in spans[0][1][2]["attributes"])
    with pytest.raises(ClickHouseBadRows, match=f"span {hex_id('over', 16)!r}: a span's attribute values add up "
                                                 f"to {fetched} bytes, more than a row may bring"):
        open_ch(chdb_dir, database)
    with open_ch(chdb_dir, database, skip_bad_rows=True) as ch:
        sizes = dict(ch.connection.execute(
            f"SELECT span_id, strlen(attribute_values[list_position(attribute_keys, '{c.OI_OUTPUT_VALUE}')]) "
            "FROM spans").fetchall())
        assert sizes == {hex_id("small", 16): 5, hex_id("big", 16): big - big // 2}
        assert ch.evidence.as_dict()["rows_skipped"]["count"] == 1

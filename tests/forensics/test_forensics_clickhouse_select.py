"""Unit tests of the generated ClickHouse select, the URL, the window and the error mapping (no engine)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry._span_formats import FORMATS
from telemetry.exceptions import (
    ClickHouseAuthError,
    ClickHouseInputError,
    ClickHouseTableMissing,
    ClickHouseUnreachable,
)
from telemetry.forensics.clickhouse import ReadWindow, attribute_keys, parse_url, spans_select, window
from telemetry.forensics.clickhouse._client import error_for
from telemetry.forensics.clickhouse._keys import PEER_KEY_PREFIXES, PEER_KEYS, PEER_RUN_KEYS
from telemetry.forensics.clickhouse._select import (
    IDENTIFIER,
    KIND_SPELLINGS,
    STATUS_SPELLINGS,
    check_columns,
    is_lookup_table,
    normalize_type,
    quote_identifier,
)
from telemetry.runtime._resources import data_file

W = ReadWindow(1_000, 2_000, "svc")


def test_the_keys_read_are_those_spans_sql_types_and_the_peer_keys_and_arrays_are_the_constraint_lists() -> None:
    keys = attribute_keys()
    sql = data_file("queries", "spans.sql").read_text(encoding="utf-8")
    assert set(keys.keys) == set(re.findall(r"list_position\(attribute_keys, '([^']+)'\)", sql)) | set(PEER_KEYS)
    assert len(keys.keys) == len(set(keys.keys))
    assert keys.arrays == {c.DELEGATION_CONSTRAINTS_CARRIED, c.DELEGATION_CONSTRAINTS_WAIVED,
                           c.DELEGATION_WAIVER_REASONS}
    assert c.GEN_AI_CONVERSATION_ID not in keys.tool_keys and c.TOOL_KIND in keys.tool_keys
    assert c.TOOL_KIND in keys.tool_keys and c.GEN_AI_TOOL_NAME in keys.tool_keys
    for peer in (c.OI_INPUT_VALUE, c.OI_SESSION_ID, c.OPENINFERENCE_SPAN_KIND, c.GEN_AI_OPERATION_NAME, c.OI_TOOL_NAME,
                 c.TRACELOOP_ENTITY_NAME, c.LANGFUSE_SESSION_ID, c.MLFLOW_SPAN_INPUTS, c.GEN_AI_TOOL_CALL_RESULT):
        assert peer in keys.keys and peer not in keys.tool_keys, peer  # a peer's tool span is told by its marker
    # the markers as telemetry._span_formats reads them: the value, or the value JSON-encoded (MLflow)
    assert keys.markers == {fmt.marker: (fmt.marker_value, f'"{fmt.marker_value}"') for fmt in FORMATS}
    assert keys.markers[c.OPENINFERENCE_SPAN_KIND] == ("TOOL", '"TOOL"')
    assert keys.prefixes == (c.OI_LLM_OUTPUT_MESSAGES + ".",)


def test_a_peer_tool_span_s_run_is_its_format_s_session_as_in_spans_sql() -> None:
    """On an OpenInference, Langfuse or MLflow tool span the run is its format's run key, before the
    conversation id and the trace id (``span_formats``' ``run`` keys; spans.sql reads the same)."""
    assert [(marker, key) for marker, _, key in PEER_RUN_KEYS] == [
        (c.OPENINFERENCE_SPAN_KIND, c.OI_SESSION_ID), (c.LANGFUSE_OBSERVATION_TYPE, c.LANGFUSE_SESSION_ID),
        (c.MLFLOW_SPAN_TYPE, c.MLFLOW_TRACE_REQUEST_ID)]
    select = spans_select("otel", "otel_traces", W, 11)
    run = re.search(r"groupUniqArray\((multiIf\(.*?lower\(TraceId\)\))\)", select.sql).group(1)  # type: ignore[union-attr]
    named = [select.parameters[p] for p in re.findall(r"mapContains\(SpanAttributes, \{(p\d+):String\}\)", run)]
    assert named == [c.OI_SESSION_ID, c.LANGFUSE_SESSION_ID, c.MLFLOW_TRACE_REQUEST_ID, c.GEN_AI_CONVERSATION_ID]


def test_the_keys_other_instrumentations_write_are_fetched() -> None:
    """The peer formats' keys forensics reads on their spans (whatever spans.sql reads is fetched
    as well, by construction), and the OpenInference output messages by prefix."""
    keys = attribute_keys()
    for key in (c.GEN_AI_OPERATION_NAME, c.GEN_AI_TOOL_CALL_ARGUMENTS, c.GEN_AI_TOOL_CALL_RESULT,
                c.GEN_AI_TOOL_STATUS, c.OPENINFERENCE_SPAN_KIND, c.OI_TOOL_NAME, c.OI_INPUT_VALUE, c.OI_OUTPUT_VALUE,
                c.OI_SESSION_ID, c.OI_TOOL_CALL_ID, c.TRACELOOP_SPAN_KIND, c.TRACELOOP_ENTITY_NAME,
                c.TRACELOOP_ENTITY_INPUT, c.TRACELOOP_ENTITY_OUTPUT, c.TRACELOOP_WORKFLOW_NAME,
                c.LANGFUSE_OBSERVATION_TYPE, c.LANGFUSE_OBSERVATION_INPUT, c.LANGFUSE_OBSERVATION_OUTPUT,
                c.LANGFUSE_SESSION_ID, c.MLFLOW_SPAN_TYPE, c.MLFLOW_SPAN_INPUTS, c.MLFLOW_SPAN_OUTPUTS,
                c.MLFLOW_TRACE_REQUEST_ID):
        assert key in PEER_KEYS and key in keys.keys, key
    assert any(f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.id".startswith(p)
               for p in PEER_KEY_PREFIXES)


def test_the_select_binds_every_value_and_holds_no_quote() -> None:
    select = spans_select("otel", "otel_traces", W, 11)
    assert "'" not in select.sql and '"' not in select.sql
    placeholders = dict(re.findall(r"\{(p\d+):([^}]+)\}", select.sql))
    assert set(placeholders) == set(select.parameters)
    values = list(select.parameters.values())
    assert "svc" in values and 1_000 in values and 2_000 in values and 11 in values
    assert list(attribute_keys().keys) in values
    assert "FROM `otel`.`otel_traces`" in select.sql
    assert "ServiceName = {" in select.sql and "LIMIT {" in select.sql


def test_the_map_is_cut_by_one_map_filter_and_no_lambda_captures_it() -> None:
    """ClickHouse copies a column a lambda captures once per array element: the map goes through
    mapFilter (its own lambda sees one key and value at a time), never into arrayMap/arrayFilter."""
    sql = spans_select("otel", "otel_traces", W, 11).sql
    assert sql.count("mapFilter((k, v) -> has({") == 1 and "startsWith(k, {" in sql
    assert "mapKeys(kept)" in sql and "mapValues(kept)" in sql
    for lambda_body in re.findall(r"array(?:Map|Filter|Exists)\(\(?[a-z, ]+\)? ->(.*?), (?:attribute_keys|mapValues)", sql):
        assert "SpanAttributes" not in lambda_body, lambda_body
    assert "arrayFilter" not in sql and "JSONExtract(v," in sql


def test_every_read_of_the_table_is_bounded_by_the_padded_window() -> None:
    window = ReadWindow(10**18, 10**18 + 60 * 10**9, None, padding_ns=5 * 10**9)
    select = spans_select("otel", "otel_traces", window, 11)
    reads = select.sql.count("FROM `otel`.`otel_traces`")
    assert reads == 4  # the runs picked, their tool spans' parent ids, OpenInference's traces, the rows
    assert select.sql.count("Timestamp >= fromUnixTimestamp64Nano(") == reads
    values = set(v for v in select.parameters.values() if isinstance(v, int))
    assert {10**18, 10**18 + 60 * 10**9, 10**18 - 5 * 10**9, 10**18 + 65 * 10**9} <= values
    assert select.sql.count("picked_runs") == 4 and select.sql.count("groupUniqArray(") == 1  # chosen once


def test_with_the_lookup_table_the_bounds_reach_the_picked_traces_whole() -> None:
    select = spans_select("otel", "otel_traces", W, 11, lookup="otel_traces_trace_id_ts")
    assert "FROM `otel`.`otel_traces_trace_id_ts` WHERE TraceId IN (SELECT arrayJoin(tupleElement(picked, 2)))" in select.sql
    assert select.sql.count("Timestamp >= tupleElement(bounds, 1) AND Timestamp < tupleElement(bounds, 2)") == 3
    assert "least(" in select.sql and "greatest(" in select.sql
    with pytest.raises(ClickHouseInputError, match="not a plain identifier"):
        spans_select("otel", "otel_traces", W, 11, lookup="x`y")


@pytest.mark.parametrize("columns, expected", [
    ({"TraceId": "String", "Start": "SimpleAggregateFunction(min, DateTime)",
      "End": "SimpleAggregateFunction(max, DateTime)"}, True),
    ({"TraceId": "String", "Start": "DateTime64(9)", "End": "DateTime64(9)"}, True),
    ({"TraceId": "String", "Start": "DateTime", "End": "DateTime('UTC')"}, True),
    ({"TraceId": "String", "Start": "DateTime"}, False),
    ({"TraceId": "UInt64", "Start": "DateTime", "End": "DateTime"}, False),
    ({}, False),
])
def test_the_lookup_table_is_recognised_in_each_exporter_version(columns: dict[str, str], expected: bool) -> None:
    assert is_lookup_table(columns) is expected


def test_without_a_service_there_is_no_service_filter() -> None:
    assert "ServiceName =" not in spans_select("otel", "otel_traces", ReadWindow(1, 2), 5).sql


def test_both_kind_and_status_spellings_map_to_the_otlp_names() -> None:
    select = spans_select("otel", "otel_traces", W, 5)
    values = [v for v in select.parameters.values() if isinstance(v, list)]
    assert ["Internal", "SPAN_KIND_INTERNAL"] in values and ["Error", "STATUS_CODE_ERROR"] in values
    assert "" in KIND_SPELLINGS["SPAN_KIND_UNSPECIFIED"] and "" in STATUS_SPELLINGS["STATUS_CODE_UNSET"]


@given(st.text(max_size=40))
def test_an_identifier_is_quoted_exactly_or_refused(name: str) -> None:
    if IDENTIFIER.fullmatch(name):
        assert quote_identifier(name, "table") == f"`{name}`"
    else:
        with pytest.raises(ClickHouseInputError, match="not a plain identifier"):
            spans_select("otel", name, W, 5)


@pytest.mark.parametrize("name", ["t`; DROP TABLE x; --", "otel.otel_traces", "a b", "", "1abc", "t\x00"])
def test_hostile_identifiers_are_refused(name: str) -> None:
    with pytest.raises(ClickHouseInputError, match="not a plain identifier"):
        spans_select(name, "otel_traces", W, 5)


def test_types_are_checked_through_low_cardinality_and_time_zones() -> None:
    assert normalize_type("LowCardinality(String)") == "String"
    assert normalize_type("Map(LowCardinality(String), String)") == "Map(String, String)"
    assert normalize_type("DateTime64(9, 'UTC')") == "DateTime64(9)"
    with pytest.raises(ClickHouseInputError, match="has no column Duration"):
        check_columns({"Timestamp": "DateTime64(9)", "TraceId": "String", "SpanId": "String",
                       "ParentSpanId": "String", "SpanName": "String", "SpanKind": "String",
                       "ServiceName": "String", "ScopeName": "String", "ScopeVersion": "String",
                       "SpanAttributes": "Map(String, String)"}, "table t")


def test_urls_carry_tls_database_options_and_settings_but_never_a_password() -> None:
    target = parse_url("https://reader@ch.example:8443/traces?verify=0&max_execution_time=60&query_timeout=5")
    assert (target.scheme, target.host, target.port, target.user, target.database) == (
        "https", "ch.example", 8443, "reader", "traces")
    assert target.options == {"verify": "0", "query_timeout": "5"} and target.settings == {"max_execution_time": "60"}
    assert target.label == "https://reader@ch.example:8443/traces"
    assert parse_url("http://h").database == "otel"
    for bad, message in [("ftp://h/x", "must start with"), ("http://u:secret@h", "holds a password"),
                         ("http:///otel", "names no host"), ("http://h/?a%20b=1", "not a setting name")]:
        with pytest.raises(ClickHouseInputError, match=message) as caught:
            parse_url(bad)
        assert "secret" not in str(caught.value)


def test_the_window_is_last_6h_by_default_and_refuses_mixed_or_bad_options() -> None:
    now = 10**18
    assert window(now_ns=now) == ReadWindow(now - 6 * 3600 * 10**9, now + 1, None)
    assert window(last="90m", service="s", now_ns=now) == ReadWindow(now - 5400 * 10**9, now + 1, "s")
    assert window("2024-01-01T00:00:00Z", "2024-01-01T02:00:00+01:00", now_ns=now) == ReadWindow(
        1_704_067_200 * 10**9, 1_704_070_800 * 10**9, None)
    for kwargs, message in [({"last": "6x"}, "not a duration"), ({"since": "yesterday"}, "not a time"),
                            ({"until": "2024-01-01"}, "needs --since"),
                            ({"last": "1h", "since": "2024-01-01"}, "not both"),
                            ({"service": "crew\udcff"}, r"--service 'crew\\udcff' is not UTF-8 text")]:
        with pytest.raises(ClickHouseInputError, match=message):
            window(**kwargs)  # type: ignore[arg-type]
    # An empty window is refused where every window is made, naming both ends, before anything connects.
    with pytest.raises(ClickHouseInputError, match=re.escape(
            "the time window is empty: --until (2024-01-01T00:00:00Z) must be later than --since (2024-01-01T00:00:00Z)")):
        window("2024-01-01T00:00:00Z", "2024-01-01T01:00:00+01:00", now_ns=now)
    for since, until in ((5, 5), (6, 5)):
        with pytest.raises(ClickHouseInputError, match="window is empty"):
            ReadWindow(since, until)
    with pytest.raises(ClickHouseInputError, match="padding must not be negative"):
        ReadWindow(5, 6, padding_ns=-1)


@pytest.mark.parametrize("message, kind", [
    ("Code: 516. DB::Exception: reader: Authentication failed (AUTHENTICATION_FAILED)", ClickHouseAuthError),
    ("Code: 497. DB::Exception: reader: Not enough privileges", ClickHouseAuthError),
    ("Code: 60. DB::Exception: Unknown table expression identifier 'otel.x'", ClickHouseTableMissing),
    ("Code: 81. DB::Exception: Database nope does not exist", ClickHouseTableMissing),
    ("Code: 159. DB::Exception: Timeout exceeded", ClickHouseUnreachable),
    ("Code: 62. DB::Exception: Syntax error", ClickHouseInputError),
])
def test_server_errors_map_to_named_errors_without_the_password(message: str, kind: type) -> None:
    target = parse_url("http://reader@h:8123/otel")
    error = error_for(RuntimeError(message + " hunter2"), target, "hunter2", "reading spans")
    assert type(error) is kind and "hunter2" not in str(error) and "http://reader@h:8123/otel" in str(error)

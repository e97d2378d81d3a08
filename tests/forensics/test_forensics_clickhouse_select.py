"""Unit tests of the generated ClickHouse select, the URL, the window and the error mapping (no engine)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.exceptions import (
    ClickHouseAuthError,
    ClickHouseInputError,
    ClickHouseTableMissing,
    ClickHouseUnreachable,
)
from telemetry.forensics.clickhouse import Window, attribute_keys, parse_url, spans_select, window
from telemetry.forensics.clickhouse.client import error_for
from telemetry.forensics.clickhouse.select import (
    IDENTIFIER,
    KIND_SPELLINGS,
    STATUS_SPELLINGS,
    check_columns,
    normalize_type,
    quote_identifier,
)
from telemetry.runtime.resources import data_file

W = Window(1_000, 2_000, "svc")


def test_the_keys_read_are_exactly_those_spans_sql_types_and_arrays_are_the_constraint_lists() -> None:
    keys = attribute_keys()
    sql = data_file("queries", "spans.sql").read_text(encoding="utf-8")
    assert set(keys.keys) == set(re.findall(r"list_position\(attribute_keys, '([^']+)'\)", sql))
    assert keys.arrays == {c.DELEGATION_CONSTRAINTS_CARRIED, c.DELEGATION_CONSTRAINTS_WAIVED,
                           c.DELEGATION_WAIVER_REASONS}
    assert c.GEN_AI_CONVERSATION_ID not in keys.tool_keys and c.TOOL_KIND in keys.tool_keys


def test_the_select_binds_every_value_and_holds_no_quote() -> None:
    select = spans_select("otel", "otel_traces", W, 11)
    assert "'" not in select.sql and '"' not in select.sql
    placeholders = dict(re.findall(r"\{(p\d+):([^}]+)\}", select.sql))
    assert set(placeholders) == set(select.parameters)
    values = list(select.parameters.values())
    assert "svc" in values and 1_000 in values and 2_000 in values and 11 in values
    assert list(attribute_keys().keys) in values
    assert "FROM `otel`.`otel_traces`" in select.sql
    assert "mapContains(SpanAttributes" in select.sql and "JSONExtract(SpanAttributes[k]" in select.sql
    assert "ServiceName = {" in select.sql and "LIMIT {" in select.sql


def test_without_a_service_there_is_no_service_filter() -> None:
    assert "ServiceName =" not in spans_select("otel", "otel_traces", Window(1, 2), 5).sql


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
    assert window(now_ns=now) == Window(now - 6 * 3600 * 10**9, now + 1, None)
    assert window(last="90m", service="s", now_ns=now) == Window(now - 5400 * 10**9, now + 1, "s")
    assert window("2024-01-01T00:00:00Z", "2024-01-01T01:00:00+01:00", now_ns=now) == Window(
        1_704_067_200 * 10**9, 1_704_067_200 * 10**9, None)
    for kwargs, message in [({"last": "6x"}, "not a duration"), ({"since": "yesterday"}, "not a time"),
                            ({"until": "2024-01-01"}, "needs --since"),
                            ({"last": "1h", "since": "2024-01-01"}, "not both")]:
        with pytest.raises(ClickHouseInputError, match=message):
            window(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ClickHouseInputError, match="window is empty"):
        spans_select("otel", "otel_traces", Window(5, 5), 1)


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

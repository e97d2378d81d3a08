"""A chDB read's query parameters, written as text by ``_parameters``, reach the real engine exactly.

chDB takes every ``{name:Type}`` value as the text ClickHouse parses into that type; a value the
text changed on the way (a quote, a backslash, a tab, a NUL, any Unicode) would select other spans
than the user named, silently. Each property sends values through the engine and reads them back
as Arrow; a value that cannot be sent exactly is refused by name before anything is sent.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.exceptions import ClickHouseInputError
from telemetry.forensics.clickhouse import connect
from telemetry.forensics.clickhouse._parameters import chdb_parameters, parameter_text
from telemetry.forensics.clickhouse._select import ReadWindow, columns_select, spans_select

from test_forensics_clickhouse import engine_kept_up  # noqa: F401  (autouse fixture)

_ROUND_TRIP = "SELECT {s:String} AS s, {a:Array(String)} AS a, {i:Int64} AS i, {u:UInt64} AS u"
_TYPES = {"s": "String", "a": "Array(String)", "i": "Int64", "u": "UInt64"}
_HOSTILE = "x') OR 1=1 --\\'\t\n\r\0\\0\\n\\\\ ü 𝄞"


@pytest.fixture(scope="module")
def handle(chdb_dir: Path) -> Any:
    connection = connect(f"chdb://{chdb_dir}")
    yield connection.client
    connection.close()


def _round_trip(handle: Any, values: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa

    data = handle.query(_ROUND_TRIP, "Arrow", params=chdb_parameters(values, _TYPES)).bytes()
    return pa.ipc.open_file(pa.BufferReader(data)).read_all().to_pylist()[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(), texts=st.lists(st.text(), max_size=5),
       signed=st.integers(-c.INT64_MAX - 1, c.INT64_MAX), unsigned=st.integers(0, 2**64 - 1))
@example(text=_HOSTILE, texts=[_HOSTILE, "", "'", "\\", "]", "','"], signed=-c.INT64_MAX - 1, unsigned=2**64 - 1)
@example(text="", texts=[], signed=0, unsigned=0)
def test_every_text_and_integer_reaches_the_engine_exactly(handle: Any, text: str, texts: list[str], signed: int,
                                                            unsigned: int) -> None:
    values = {"s": text, "a": texts, "i": signed, "u": unsigned}
    assert _round_trip(handle, values) == values


@given(texts=st.lists(st.text(), max_size=4))
def test_the_text_holds_no_raw_character_that_would_end_a_value(texts: list[str]) -> None:
    """A raw tab or newline ends an escaped value, and a NUL may end a C string on its way."""
    for written in [parameter_text(t, "String") for t in texts] + [parameter_text(texts, "Array(String)")]:
        assert not set(written) & set("\t\n\r\0")


@pytest.mark.parametrize(("value", "type_name", "said"), [
    ("\udcff", "String", r"the query parameter value \('\\udcff'\) is not Unicode text"),
    (["ok", "\ud800"], "Array(String)", "is not Unicode text"),
    (2**63, "Int64", r"does not fit a Int64 \(from -9223372036854775808 to 9223372036854775807\)"),
    (-1, "UInt64", "does not fit a UInt64"),
    (True, "Int64", "cannot be bound as Int64"),
    (1.5, "UInt64", "cannot be bound as UInt64"),
    ("7", "Int64", "cannot be bound as Int64"),
    ([1], "Array(String)", r"cannot be bound as Array\(String\)"),
    ("x", "Float64", r"cannot be bound as Float64"),
])
def test_a_value_that_cannot_be_sent_exactly_is_refused_by_name(value: Any, type_name: str, said: str) -> None:
    with pytest.raises(ClickHouseInputError, match=said):
        parameter_text(value, type_name)


def test_every_parameter_of_the_generated_selects_has_a_type_the_text_is_written_for() -> None:
    for select in (spans_select("otel", "otel_traces", ReadWindow(0, 10**18, service=_HOSTILE), 11),
                   spans_select("otel", "otel_traces", ReadWindow(0, 10**18), 11, lookup="otel_traces_trace_id_ts"),
                   columns_select("otel", "otel_traces")):
        assert set(select.types) == set(select.parameters)
        assert set(select.types.values()) <= {"String", "Array(String)", "Int64", "UInt64"}
        chdb_parameters(select.parameters, select.types)  # every value fits its type (or this raises)


def test_a_chdb_read_needs_no_clickhouse_connect(chdb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chdb extra does not install clickhouse-connect: a chDB read connects, reads a table's
    columns and streams a select without it."""
    monkeypatch.setitem(sys.modules, "clickhouse_connect", None)
    connection = connect(f"chdb://{chdb_dir}")
    try:
        assert connection.columns("system", "one") == {"dummy": "UInt8"}
        select = columns_select("system", "one")
        with connection.stream(select, "reading the columns") as batches:
            assert [row for batch in batches for row in batch.to_pylist()] == [{"name": "dummy", "type": "UInt8"}]
    finally:
        connection.close()

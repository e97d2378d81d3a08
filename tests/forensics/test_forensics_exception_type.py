"""A span's error type from its exception event (``exception.type``), where it has no ``error.type``.

A real OpenLLMetry ``@tool`` that raises (``tests/peers/openllmetry_raising.py``: the exception is
recorded only as an event) read from JSON lines, from Parquet ``ingest`` wrote and from ClickHouse
(chDB, the Collector's ``otel_traces``) gives one error type, outcome and evidence; the rules
(``error.type`` first, the first exception event, other events ignored); any ``exception.type``
string read back exactly or refused by name; hostile values through the HTML page and ClickHouse.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_forensics_peer_layer import genai_tool, rows, write

from telemetry import conventions as c
from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import ingest, open_traces
from telemetry.forensics.html import write_html

from clickhouse_support import shifted_lines, write_lines
from forensics_builder import TraceBuilder, attrs, hex_id
from test_forensics_clickhouse import SHIFT_NS, engine_kept_up, load_exported, open_ch  # noqa: F401  (autouse fixture)

_TOOL_SQL = ("SELECT tool_name, transport, outcome, error_type, span_format, status_code FROM spans "
             "WHERE tool_name IS NOT NULL ORDER BY start_time_unix_nano")
RAISED_TYPE = "tests.peers.openllmetry_raising.GatewayTimeout"
RAISED_TOKEN = "tests_peers_openllmetry_raising_gateway_timeout"
_TOKEN = re.compile(r"[a-z0-9_]{1,64}")


def exception_event(at: str, exception_type: Any, name: str = c.EXCEPTION_EVENT) -> dict[str, Any]:
    value = exception_type if isinstance(exception_type, dict) else {"stringValue": exception_type}
    return {"timeUnixNano": at, "name": name,
            "attributes": [{"key": c.EXCEPTION_TYPE, "value": value},
                           {"key": "exception.message", "value": {"stringValue": "private detail"}}]}


# --- a real instrumentor's raising tool, from every source ----------------------------------------


@pytest.fixture(scope="module")
def raised_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The raising story, written by traceloop-sdk in its own interpreter (no network)."""
    from tests.peers.generate import EXTRA, generate, missing_packages

    missing = missing_packages(EXTRA["openllmetry_raising"])
    if missing:
        message = f"traceloop-sdk not importable ({', '.join(missing)}); pip install traceloop-sdk"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    outcome = generate(tmp_path_factory.mktemp("raising"), ["openllmetry_raising"])["openllmetry_raising"]
    assert outcome.returncode == 0, outcome.stderr[-4000:]
    assert not outcome.network, outcome.network
    return outcome.path


def test_the_instrumentor_records_the_type_only_in_the_exception_event(raised_file: Path) -> None:
    """What traceloop-sdk was seen to write: status ERROR, no error.type, the type in the event."""
    from tests.peers.openllmetry_raising import MESSAGE, TOOL

    spans = [s for line in raised_file.read_text().splitlines() for rs in json.loads(line)["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    tool = next(s for s in spans if any(a["key"] == c.TRACELOOP_ENTITY_NAME and a["value"]["stringValue"] == TOOL
                                        for a in s["attributes"]))
    assert c.ERROR_TYPE not in {a["key"] for a in tool["attributes"]}
    assert tool["status"]["code"] == 2
    event = next(e for e in tool["events"] if e["name"] == c.EXCEPTION_EVENT)
    got = {a["key"]: a["value"]["stringValue"] for a in event["attributes"]}
    # the SDK's record_exception names a class outside builtins with its module, as error.type would
    assert got[c.EXCEPTION_TYPE] == RAISED_TYPE and got["exception.message"] == MESSAGE


def test_json_lines_parquet_and_clickhouse_give_the_event_s_type(raised_file: Path, tmp_path: Path, chdb_dir: Path,
                                                                 database: str) -> None:
    from tests.peers.openllmetry_raising import MESSAGE, TOOL

    expected = [(TOOL, c.TRANSPORT_ERROR, RAISED_TOKEN, RAISED_TYPE, c.FORMAT_TRACELOOP, "error")]
    with open_traces([raised_file]) as files:
        assert files.connection.execute(_TOOL_SQL).fetchall() == expected
        counts = files.evidence.formats.formats[c.FORMAT_TRACELOOP]
        assert counts.inferred["error type from the exception event"] == 1
        assert "error type from the exception event 1" in "\n".join(counts.render())
        report = json.dumps(files.answers(), default=str) + "\n".join(files.evidence.render())
        assert MESSAGE not in report and "4242" not in report  # the message is never read into a report
    ingest([raised_file], tmp_path / "pq")
    with open_traces([tmp_path / "pq"]) as parts:
        assert parts.connection.execute(_TOOL_SQL).fetchall() == expected
    # ClickHouse: the story's times moved into the read window; the rows carry the events as the exporter writes them
    first = min(int(s["startTimeUnixNano"]) for line in raised_file.read_text().splitlines()
                for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"])
    shift = time.time_ns() - 3600 * 10**9 - first  # an hour ago: inside the one-day window open_ch reads
    lines = shifted_lines(raised_file.read_text().splitlines(), shift)
    load_exported(chdb_dir, database, lines)
    with open_ch(chdb_dir, database) as ch, open_traces([write_lines(tmp_path / "same.jsonl", lines)]) as same:
        assert ch.connection.execute(_TOOL_SQL).fetchall() == expected
        assert same.connection.execute(_TOOL_SQL).fetchall() == expected
        assert ch.evidence.formats.formats[c.FORMAT_TRACELOOP].inferred["error type from the exception event"] == 1


# --- the rules -------------------------------------------------------------------------------------


def test_error_type_wins_then_the_first_exception_event_and_other_events_are_ignored(tmp_path: Path) -> None:
    trace = hex_id("trace:exc-rules", 32)
    spans = [genai_tool(trace, n, "charge") for n in range(1, 7)]
    at = spans[0]["startTimeUnixNano"]
    spans[0]["attributes"].append({"key": c.ERROR_TYPE, "value": {"stringValue": "QuotaError"}})
    spans[0]["events"] = [exception_event(at, "TimeoutError")]  # error.type says it: the event is not read
    spans[1]["events"] = [exception_event(at, "log", name="log"), exception_event(at, "FirstError"),
                          exception_event(at, "SecondError")]  # the first exception event wins
    spans[2]["events"] = [{"timeUnixNano": at, "name": c.EXCEPTION_EVENT}]  # an exception event without a type
    spans[3]["events"] = [exception_event(at, {"intValue": "42"})]  # a scalar read as text, as attributes are
    spans[4]["events"] = [exception_event(at, {"kvlistValue": {"values": []}})]  # not a type: none
    spans[5]["events"] = [exception_event(at, "TimeoutError", name="retry")]  # not an exception event
    with open_traces([write(tmp_path, spans)]) as traces:
        got = rows(traces, "SELECT s.transport, s.outcome, s.error_type, p.error_type_source FROM spans s "
                           "JOIN peer_spans p USING (trace_id, span_id) ORDER BY s.start_time_unix_nano")
    assert [tuple(r.values()) for r in got] == [
        (c.TRANSPORT_ERROR, "quota_error", "QuotaError", c.ERROR_TYPE_FROM_ATTRIBUTE),
        (c.TRANSPORT_ERROR, "first_error", "FirstError", c.ERROR_TYPE_FROM_EVENT),
        (c.TRANSPORT_ERROR, c.OUTCOME_ERROR, None, None),
        (c.TRANSPORT_ERROR, "42", "42", c.ERROR_TYPE_FROM_EVENT),
        (c.TRANSPORT_ERROR, c.OUTCOME_ERROR, None, None),
        (c.TRANSPORT_OK, None, None, None)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(max_size=80) | st.text(alphabet=st.characters(codec="utf-8"), min_size=200, max_size=2000)
       | st.lists(st.text(max_size=4) | st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]),
                  max_size=4).map("".join),
       limit=st.sampled_from([None, 4096]))
def test_any_exception_type_reads_back_exactly_or_is_refused_by_name(tmp_path: Path, value: str,
                                                                     limit: int | None) -> None:
    """Any string, written as JSON does (surrogates as \\u escapes): read back exactly as a JSON
    reader decodes it (an escaped high and low surrogate in a row are one character) as the error
    type, its outcome a bounded token; or the line is refused, naming why (a lone surrogate is no
    UTF-8 text; a line past --max-line-bytes)."""
    trace = hex_id("trace:exc-property", 32)
    spans = [genai_tool(trace, 1, "charge")]
    spans[0]["events"] = [exception_event(spans[0]["startTimeUnixNano"], value)]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                   "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]})
                    + "\n", encoding="ascii")
    options: dict[str, Any] = {} if limit is None else {"max_line_bytes": limit}
    expected = json.loads(json.dumps(value))  # what any JSON reader makes of it: a \ud800\udc00 pair is one character
    surrogate = any(0xD800 <= ord(ch) <= 0xDFFF for ch in expected)
    too_long = limit is not None and path.stat().st_size > limit
    try:
        with open_traces([path], **options) as traces:
            got = traces.connection.execute("SELECT error_type, outcome, transport FROM spans").fetchall()
    except ForensicsInputError as refused:
        assert surrogate or too_long, (value, refused)
        said = str(refused)
        assert str(path) in said and (("surrogate" in said and surrogate) or ("--max-line-bytes" in said and too_long))
        return
    assert not too_long
    assert got[0][0] == expected and got[0][2] == c.TRANSPORT_ERROR
    assert got[0][1] == c.OUTCOME_ERROR or _TOKEN.fullmatch(got[0][1])


# --- hostile values -------------------------------------------------------------------------------

HOSTILE_TYPE = "</dd><script>alert(7)</script>\x1b[2J\u202eErr\"'><img src=x onerror=alert(8)>"


def _hostile_lines() -> list[str]:
    """One of our tool spans whose read-back found the write not persisted (readback_mismatches lists
    its error type), written without error.type and with a hostile exception event."""
    b = TraceBuilder()
    b.add("r-exc", "update_price", c.KIND_WRITE, "writer", 5,
          attrs=attrs(STATE_KEY="price/sku-1", TOOL_READBACK=c.READBACK_MISMATCH))
    out = []
    for text in b.lines():
        data = json.loads(text)
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    s["events"] = [exception_event(str(s["startTimeUnixNano"]), HOSTILE_TYPE)]
        out.append(json.dumps(data))
    return out


def test_a_hostile_exception_type_is_escaped_in_the_html_page(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "hostile.jsonl", _hostile_lines())
    with open_traces([path]) as traces:
        answers = traces.answers()
        assert [r["error_type"] for r in answers["readback_mismatches"]] == [HOSTILE_TYPE]
        page = write_html(traces, tmp_path / "r.html", answers=answers).read_text(encoding="utf-8")
    assert "<script>" not in page and "<img" not in page and "\x1b" not in page and "\u202e" not in page
    assert "&lt;/dd&gt;&lt;script&gt;alert(7)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(8)&gt;" in page


@pytest.fixture
def hostile_in_clickhouse(tmp_path: Path, chdb_dir: Path, database: str) -> Iterator[list[str]]:
    lines = shifted_lines(_hostile_lines(), SHIFT_NS)
    load_exported(chdb_dir, database, lines)
    yield lines


def test_a_hostile_exception_type_from_clickhouse_is_bound_and_read_exactly(
        hostile_in_clickhouse: list[str], tmp_path: Path, chdb_dir: Path, database: str) -> None:
    sql = "SELECT error_type, readback, outcome FROM spans"
    with open_ch(chdb_dir, database) as ch, open_traces([write_lines(tmp_path / "h.jsonl", hostile_in_clickhouse)]) as f:
        assert ch.connection.execute(sql).fetchall() == f.connection.execute(sql).fetchall()
        assert ch.connection.execute(sql).fetchall()[0][0] == HOSTILE_TYPE


def test_watch_reads_the_event_s_type_as_the_report_does(tmp_path: Path) -> None:
    """``watch`` loads through the same reader: a peer tool call that raised with its status UNSET
    is a masked failure whose outcome is the exception event's type, as in the report."""
    from prometheus_client import CollectorRegistry

    from telemetry.forensics.watch import Watcher, WatchOptions

    trace = hex_id("trace:exc-watch", 32)
    spans = [genai_tool(trace, 1, "charge")]
    spans[0]["events"] = [exception_event(spans[0]["startTimeUnixNano"], "TimeoutError")]
    folder = tmp_path / "traces"
    folder.mkdir()
    write(folder, spans)
    with open_traces([folder]) as traces:
        reported = [(r["tool_name"], r["outcome"]) for r in traces.run("masked_failures")]
    assert reported == [("charge", "timeout_error")]
    w = Watcher(WatchOptions(paths=(str(folder),), settle=0.0), registry=CollectorRegistry())
    try:
        found = w.run_pass().new
    finally:
        w.close()
    assert [(f.row["tool_name"], f.row["outcome"]) for f in found if f.question == "masked_failures"] == reported

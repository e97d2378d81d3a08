"""The real clickhouse-connect HTTP client: streaming, bound parameters and every failure named.

No ClickHouse server can run here (Debian's is too old for Map columns), so a loopback HTTP
server answering from a chDB session stands in for one (``chdb_http``). Set ``CLICKHOUSE_URL``
(``http://USER@HOST:8123``, password in ``CLICKHOUSE_PASSWORD``) to run the same tests against a
real server: each creates its own database there and drops it afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from telemetry.exceptions import ClickHouseAuthError, ClickHouseInputError, ClickHouseSchemaError, ClickHouseUnreachable
from telemetry.forensics import QUESTION_NAMES, open_clickhouse, open_traces
from telemetry.forensics.clickhouse import connect, iso

from chdb_http import ChdbHttpServer, closed_port, session_for
from clickhouse_support import create, exporter_rows, insert_rows, shifted_lines, write_lines
from forensics_builder import TraceBuilder
from forensics_incidents import planted
from test_forensics_clickhouse import SHIFT_NS, engine_kept_up, fill_many  # noqa: F401  (autouse fixture)

PASSWORD = "pa55 w0rd'\"\\"
"""A password with quotes and a backslash: it must reach the server intact and never be shown."""


@pytest.fixture
def server(chdb_dir: Path, database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A URL to a server holding ``database`` (created by the test), and a client for setup."""
    import clickhouse_connect

    real = os.environ.get("CLICKHOUSE_URL")
    if real:
        parts = urlsplit(real)
        client = clickhouse_connect.get_client(host=parts.hostname, port=parts.port or 8123,
                                               username=parts.username or "default",
                                               password=os.environ.get("CLICKHOUSE_PASSWORD", ""),
                                               secure=parts.scheme == "https")
        try:
            yield {"url": f"{real.rstrip('/')}/{database}", "client": client, "requests": None}
        finally:
            client.command(f"DROP DATABASE IF EXISTS {database}")
            client.close()
        return
    monkeypatch.setenv("CLICKHOUSE_PASSWORD", PASSWORD)
    setup = clickhouse_connect.get_client(dsn=f"chdb://{chdb_dir}")
    session = session_for(str(chdb_dir))
    try:
        with ChdbHttpServer(session, "reader", PASSWORD, path=str(chdb_dir)) as http:
            yield {"url": f"http://reader@127.0.0.1:{http.port}/{database}", "client": setup,
                   "requests": http.requests, "port": http.port}
    finally:
        session.close()  # chDB crashes at interpreter exit if a session is left open
        setup.close()


def _fill(server: dict[str, Any], database: str, builder: TraceBuilder) -> list[str]:
    lines = shifted_lines(builder.lines(per_line=50), SHIFT_NS)
    create(server["client"], database)
    insert_rows(server["client"], list(exporter_rows(lines)), database)
    return lines


def test_questions_over_http_equal_the_file_path(server: dict[str, Any], database: str, tmp_path: Path) -> None:
    lines = _fill(server, database, planted())
    path = write_lines(tmp_path / "t.jsonl", lines)
    with open_traces([path]) as files, open_clickhouse(server["url"], last="1d") as ch:
        for name in QUESTION_NAMES:
            assert ch.run(name) == files.run(name), name


def test_an_empty_window_over_http_loads_no_spans_and_says_so(server: dict[str, Any], database: str) -> None:
    """A result of no rows is a stream of the schema alone (the stand-in sends one, as a server
    does): nothing loaded, every question empty, the warning says so."""
    _fill(server, database, planted())
    with open_clickhouse(server["url"], since="2001-01-01T00:00:00Z", until="2001-01-02T00:00:00Z") as ch:
        assert ch.load_report.spans == 0
        assert all(not ch.run(name) for name in QUESTION_NAMES)
        assert any("no tool spans in" in w for w in ch.load_report.warnings())


def test_many_spans_stream_in_several_arrow_batches(server: dict[str, Any], database: str) -> None:
    fill_many(server["client"], database, 30_000)
    connection = connect(server["url"])
    try:
        from telemetry.forensics.clickhouse import ReadWindow, spans_select

        select = spans_select(database, "otel_traces", ReadWindow(0, 2**62), 10**9)
        with connection.stream(select, "test") as batches:
            sizes = [batch.num_rows for batch in batches]
    finally:
        connection.close()
    assert sum(sizes) == 30_000 and len(sizes) > 1
    with open_clickhouse(server["url"], last="1d") as ch:
        assert ch.load_report.spans == 30_000


def test_a_read_that_fails_part_way_through_is_named_in_the_servers_words(
        server: dict[str, Any], database: str) -> None:
    # The URL's settings reach the engine: a result limit that the read passes after its first
    # blocks have gone out, so the failure comes mid-stream, as a server's does when a limit or a
    # timeout is hit part-way.
    fill_many(server["client"], database, 30_000)
    url = server["url"] + "?max_result_rows=20000&result_overflow_mode=throw"
    with pytest.raises(ClickHouseInputError, match=r"while reading spans.*(?i:limit for result|TOO_MANY_ROWS)") \
            as caught:
        open_clickhouse(url, last="1d")
    assert PASSWORD not in str(caught.value)
    assert server["requests"][-1]["batches_sent"] >= 1  # it failed after rows had gone out
    with open_clickhouse(server["url"], last="1d") as ch:  # the same read without the limit
        assert ch.load_report.spans == 30_000


def test_values_travel_as_parameters_never_in_the_sql(server: dict[str, Any], database: str) -> None:
    hostile = "x') OR 1=1 UNION ALL SELECT * FROM system.users --"
    _fill(server, database, planted())
    with open_clickhouse(server["url"], last="1d", service=hostile) as ch:
        assert ch.load_report.spans == 0
    if server["requests"] is not None:
        spans_request = [r for r in server["requests"] if "mapFilter" in r["sql"]][-1]
        assert hostile not in spans_request["sql"] and "'" not in spans_request["sql"].split("FORMAT")[0]
        # sent in ClickHouse's escaped text form (a quote as \'), which the server parses as a value
        assert hostile.replace("'", "\\'") in spans_request["params"].values()
        assert all(PASSWORD not in str(r) for r in server["requests"])  # a header, never the URL or the body


def test_a_wrong_password_is_an_auth_error_that_never_shows_it(server: dict[str, Any], database: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTHER_PASSWORD", "not-the-password-" + PASSWORD)
    with pytest.raises(ClickHouseAuthError, match="refused the credentials") as caught:
        open_clickhouse(server["url"], password_env="OTHER_PASSWORD")
    assert PASSWORD not in str(caught.value) and "not-the-password" not in str(caught.value)


def test_the_report_command_names_an_unreachable_server_in_one_line() -> None:
    """`forensics report --clickhouse` to a closed port, in a process of its own (where nothing
    configured logging): exit 2 and one line on stderr, the named error; the driver's own warning
    ("Unexpected Http Driver Exception"), which Python's last-resort handler would print, is not
    said again (as `watch` says each failed pass once)."""
    url = f"http://reader@127.0.0.1:{closed_port()}/otel?connect_timeout=2"
    done = subprocess.run([sys.executable, "-m", "telemetry.cli", "forensics", "report", "--clickhouse", url,
                           "--last", "1h"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "outcome-telemetry forensics report: error: no answer from http://reader@127.0.0.1:"), done.stderr
    assert done.stdout == ""


def test_unreachable_missing_table_and_schema_errors_are_named(server: dict[str, Any], database: str) -> None:
    with pytest.raises(ClickHouseUnreachable, match="no answer from http://reader@127.0.0.1"):
        open_clickhouse(f"http://reader@127.0.0.1:{closed_port()}/otel?connect_timeout=2")
    server["client"].command(f"CREATE DATABASE IF NOT EXISTS {database}")
    with pytest.raises(ClickHouseInputError, match=f"no table {database}.otel_traces"):
        open_clickhouse(server["url"], last="1d")
    server["client"].command(f"CREATE TABLE {database}.otel_traces (Timestamp DateTime64(9), TraceId String, "
                             "SpanId String, ParentSpanId String, SpanName String, SpanKind String, "
                             "ServiceName String, ScopeName String, ScopeVersion String, "
                             "SpanAttributes Map(String, UInt64)) ENGINE = MergeTree ORDER BY Timestamp")
    with pytest.raises(ClickHouseSchemaError, match=r"column SpanAttributes is Map\(String, UInt64\)"):
        open_clickhouse(server["url"], last="1d")


def test_a_password_in_the_url_is_refused_without_repeating_it() -> None:
    with pytest.raises(ClickHouseInputError, match="holds a password") as caught:
        open_clickhouse("http://reader:hunter2@127.0.0.1:1/otel")
    assert "hunter2" not in str(caught.value)


def test_a_replaying_stand_in_answers_again_without_the_engine(chdb_dir: Path, database: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark measures the reader alone against a stand-in that replays the answer it sent:
    the second read must get the same spans, from the kept bytes, with no query run."""
    import clickhouse_connect

    monkeypatch.setenv("CLICKHOUSE_PASSWORD", PASSWORD)
    setup = clickhouse_connect.get_client(dsn=f"chdb://{chdb_dir}")
    session = session_for(str(chdb_dir))
    try:
        fill_many(setup, database, 20_000)
        with ChdbHttpServer(session, "reader", PASSWORD, path=str(chdb_dir), replay=True) as http:
            url = f"http://reader@127.0.0.1:{http.port}/{database}"
            now = time.time_ns()  # one window for both reads: the same query, as in the benchmark
            window = {"since": iso(now - 86_400 * 10**9), "until": iso(now + 3600 * 10**9)}
            with open_clickhouse(url, **window) as first:
                first_spans = first.connection.execute("SELECT * FROM spans ORDER BY span_id").fetchall()
            streamed = [r for r in http.requests if "batches_sent" in r]
            with open_clickhouse(url, **window) as second:
                assert second.connection.execute("SELECT * FROM spans ORDER BY span_id").fetchall() == first_spans
            replayed = [r for r in http.requests if r.get("replayed")]
            assert len(first_spans) == 20_000 and len(streamed) == 1 and len(replayed) == 1
            assert [r for r in http.requests if "batches_sent" in r] == streamed  # the engine was not asked again
    finally:
        session.close()
        setup.close()

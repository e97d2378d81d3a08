"""The peer-trace story read from ClickHouse (chDB, the Collector's ``otel_traces`` schema): the
Collector writes other instrumentations' attributes into ``SpanAttributes`` like ours, the read
fetches the keys the span-format layer reads, and the layer gives the answers it gives on files."""

from __future__ import annotations

from pathlib import Path

import pytest
from peer_story import FORMAT_NAMES, fixture
from test_forensics_peer_story import check_story

from telemetry import conventions as c
from telemetry.forensics import open_traces

from clickhouse_support import create, exporter_rows, insert_rows, shifted_lines, write_lines
from test_forensics_clickhouse import SHIFT_NS, client_for, engine_kept_up, load_exported, open_ch  # noqa: F401  (autouse fixture)


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if f not in (c.FORMAT_SELECTED, c.FORMAT_GENAI)])
def test_the_story_reads_the_same_from_clickhouse(fmt: str, tmp_path: Path, chdb_dir: Path, database: str) -> None:
    """The hand-built fixtures (times shifted into the read window); the pydantic-ai one carries its
    real run's times, which no window of a test picks reliably, and logfire's needs --tool-spans
    keys a ClickHouse read does not fetch."""
    lines = shifted_lines(fixture(fmt).read_text(encoding="utf-8").splitlines(), SHIFT_NS)
    load_exported(chdb_dir, database, lines)
    path = write_lines(tmp_path / "peer.jsonl", lines)
    with open_ch(chdb_dir, database) as ch, open_traces([path]) as files:
        check_story(ch, fmt)
        for name in ("masked_failures", "repeated_executions"):
            assert ch.run(name) == files.run(name), name


def test_an_exception_event_reaches_the_layer_from_clickhouse(tmp_path: Path, chdb_dir: Path, database: str) -> None:
    """The read fetches whether a span's ``Events.Name`` holds ``exception`` and that event's
    ``exception.type``: a tool span that raised with its status UNSET is a transport error, its
    outcome the type's token, from ClickHouse as from the same file."""
    import time

    from test_forensics_peer_layer import raised_spans, write

    from forensics_builder import hex_id

    trace = hex_id("trace:raised-ch", 32)
    spans = raised_spans(trace)
    shift = (time.time_ns() - 3600 * 10**9) - int(spans[0]["startTimeUnixNano"])
    lines = shifted_lines([write(tmp_path, spans).read_text(encoding="utf-8").strip()], shift)
    client = client_for(chdb_dir)
    try:
        create(client, database)
        insert_rows(client, list(exporter_rows(lines)), database)
        found = client.query(f"SELECT SpanId, `Events.Name` FROM {database}.otel_traces ORDER BY Timestamp").result_rows
        assert [list(r[1]) for r in found] == [["exception"], ["retry"], []]
    finally:
        client.close()
    sql = "SELECT transport, outcome FROM spans ORDER BY start_time_unix_nano"
    with open_ch(chdb_dir, database) as ch, open_traces([write_lines(tmp_path / "same.jsonl", lines)]) as files:
        got = ch.connection.execute(sql).fetchall()
        assert got == files.connection.execute(sql).fetchall()
        assert got[0] == (c.TRANSPORT_ERROR, "timeout_error") and got[1:] == [(c.TRANSPORT_OK, c.OUTCOME_OK)] * 2


def test_openinference_call_ids_come_from_the_llm_spans_read_from_clickhouse(tmp_path: Path, chdb_dir: Path,
                                                                              database: str) -> None:
    """The LLM spans that asked for the calls are the tool spans' siblings (no parent of theirs):
    the read fetches them too, so each tool call has the call id the file gives it."""
    lines = shifted_lines(fixture(c.FORMAT_OPENINFERENCE).read_text(encoding="utf-8").splitlines(), SHIFT_NS)
    load_exported(chdb_dir, database, lines)
    sql = ("SELECT s.span_id, s.tool_call_id, p.call_id_source FROM spans s JOIN peer_spans p USING (trace_id, span_id) "
           "WHERE s.span_format = 'openinference' ORDER BY s.span_id")
    with open_ch(chdb_dir, database) as ch, open_traces([write_lines(tmp_path / "oi.jsonl", lines)]) as files:
        got = ch.connection.execute(sql).fetchall()
        assert got == files.connection.execute(sql).fetchall()
        assert len(got) == 4 and all(row[1] and row[2] == "parent LLM span" for row in got)

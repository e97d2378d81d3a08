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
from test_forensics_clickhouse import SHIFT_NS, client_for, engine_kept_up, open_ch  # noqa: F401  (autouse fixture)


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if f not in (c.FORMAT_SELECTED, c.FORMAT_GENAI)])
def test_the_story_reads_the_same_from_clickhouse(fmt: str, tmp_path: Path, chdb_dir: Path, database: str) -> None:
    """The hand-built fixtures (times shifted into the read window); the pydantic-ai one carries its
    real run's times, which no window of a test picks reliably, and logfire's needs --tool-spans
    keys a ClickHouse read does not fetch."""
    lines = shifted_lines(fixture(fmt).read_text(encoding="utf-8").splitlines(), SHIFT_NS)
    client = client_for(chdb_dir)
    try:
        create(client, database)
        insert_rows(client, list(exporter_rows(lines)), database)
    finally:
        client.close()
    path = write_lines(tmp_path / "peer.jsonl", lines)
    with open_ch(chdb_dir, database) as ch, open_traces([path]) as files:
        check_story(ch, fmt)
        for name in ("masked_failures", "repeated_executions"):
            assert ch.run(name) == files.run(name), name

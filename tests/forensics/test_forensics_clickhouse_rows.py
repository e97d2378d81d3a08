"""ClickHouse rows on chDB: the id and time rules of a JSON line apply to each row, and the spans
that parent tool spans are read for the clock-skew evidence (and what is still not read is said)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.exceptions import ClickHouseBadRows, ForensicsInputError
from telemetry.forensics import QUESTION_NAMES, open_traces
from telemetry.forensics._cli import main as forensics_main

from clickhouse_support import create, exporter_rows, insert_rows, shifted_lines, write_lines
from forensics_builder import TraceBuilder, attrs, hex_id, ns, otlp_span_json, service_line
from test_forensics_clickhouse import SHIFT_NS, _comparable, client_for, engine_kept_up, open_ch  # noqa: F401  (autouse fixture)

HOSTILE_KEY = "x'); DROP TABLE spans_loaded; --"
HOSTILE_VALUE = "t'}}\\'); DROP TABLE otel_traces; -- \"{p0:String}"
"""Built to break out of SQL quoting (and out of a ``{name:Type}`` placeholder) if it were ever spliced."""


def _good_rows() -> list[list[Any]]:
    b = TraceBuilder()
    b.add("good", "read_state", c.KIND_READ, "a", 0.0, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ=1))
    b.add("good", "write_state", c.KIND_WRITE, "a", 1.0, attrs=attrs(STATE_KEY="k", STATE_VERSION_EXPECTED=1))
    b.add("bad", "read_state", c.KIND_READ, "b", 2.0, attrs=attrs(STATE_KEY="j", STATE_VERSION_READ=1))
    return list(exporter_rows(shifted_lines(b.lines(), SHIFT_NS)))


def _bad_rows(template: list[Any]) -> dict[str, list[Any]]:
    """Copies of one good tool span, each breaking one rule (ids as stored, or times)."""
    def row(**changes: Any) -> list[Any]:
        out = [*template]
        out[11] = dict(template[11])
        for index, value in changes.items():
            out[int(index[1:])] = value
        return out

    return {
        "a span's traceId is not 32 hex characters": row(i1="z" * 32, i2=hex_id("r1", 16)),
        "a span's spanId is not 16 hex characters": row(i2=""),
        "a span's parentSpanId is not empty or 16 hex characters": row(i2=hex_id("r3", 16), i3="'; --"),
        "a span's startTimeUnixNano or endTimeUnixNano is not an integer in [0, 2^63 - 1)": row(
            i0=-5 * 10**9, i2=hex_id("r4", 16)),
        "past 2^63": row(i2=hex_id("r5", 16), i12=2**64 - 1),
    }


def _fill(chdb_dir: Path, database: str, rows: list[list[Any]], *, ttl: bool = True) -> None:
    client = client_for(chdb_dir)
    try:
        create(client, database)
        if not ttl:  # the exporter's TTL drops a row from before 1970 on insert; a table without one keeps it
            client.command(f"ALTER TABLE {database}.otel_traces REMOVE TTL")
        insert_rows(client, rows, database)
    finally:
        client.close()


def test_bad_ids_and_times_are_refused_naming_each_row(chdb_dir: Path, database: str) -> None:
    """Bad hex, an empty id, a parent id with a quote and an end past 2^63: the read is refused,
    each row named by its trace and span id, with the JSON path's reason. A row timed before 1970
    is outside every window (and the exporter's day partitions wrap it past 2100), so no read
    reaches it: it is neither refused nor loaded."""
    good = _good_rows()
    bad = _bad_rows(good[2])
    _fill(chdb_dir, database, good + list(bad.values()), ttl=False)
    with pytest.raises(ClickHouseBadRows) as caught:
        open_ch(chdb_dir, database)
    message = str(caught.value)
    assert message.startswith("4 row(s) of chdb://") and "--skip-bad-lines" in message
    assert f"trace {'z' * 32!r} span {hex_id('r1', 16)!r}: a span's traceId is not 32 hex characters" in message
    assert "span '': a span's spanId is not 16 hex characters" in message
    assert f"span {hex_id('r3', 16)!r}: a span's parentSpanId is not empty" in message
    assert f"span {hex_id('r5', 16)!r}: a span's startTimeUnixNano or endTimeUnixNano is not" in message
    assert hex_id("r4", 16) not in message


def test_skipping_bad_rows_reads_the_rest_and_counts_them(chdb_dir: Path, database: str) -> None:
    """With skip_bad_rows the good spans load as if the bad rows were absent, and the evidence
    counts and names what was skipped."""
    good = _good_rows()
    _fill(chdb_dir, database, good + list(_bad_rows(good[2]).values()), ttl=False)
    with open_ch(chdb_dir, database, skip_bad_rows=True) as ch:
        assert ch.load_report.spans == len(good)
        assert sorted(r[0] for r in ch.connection.execute("SELECT span_id FROM spans").fetchall()) == sorted(
            r[2] for r in good)
        evidence = ch.evidence.as_dict()
        assert evidence["rows_skipped"]["count"] == 4
        assert {r["span_id"] for r in evidence["rows_skipped"]["rows"]} >= {"", hex_id("r1", 16)}
        assert any("skipped 4 malformed row(s)" in w for w in ch.evidence.warnings())
        assert any("4 malformed row(s) skipped" in n for n in ch.evidence.caveats("lost_updates"))
        label = str(ch.load_report.source).split(" table ")[0]
        assert ch.connection.execute("SELECT count(*) FROM spans_loaded WHERE source_file <> $label",
                                     {"label": label}).fetchall() == [(0,)]  # the bad rows are gone


def test_the_rules_are_the_json_lines_rules(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    """The same bad span as a JSON line is refused by the file path for the same reason."""
    line = service_line("crew", [otlp_span_json("z" * 32, hex_id("s", 16), "", ns(0), ns(1),
                                                {c.GEN_AI_TOOL_NAME: "t"})])
    with pytest.raises(ForensicsInputError, match="a span's traceId is not 32 hex characters"):
        open_traces([write_lines(tmp_path / "bad.jsonl", shifted_lines([line], SHIFT_NS))])
    _fill(chdb_dir, database, list(exporter_rows(shifted_lines([line], SHIFT_NS))))
    with pytest.raises(ClickHouseBadRows, match="a span's traceId is not 32 hex characters"):
        open_ch(chdb_dir, database)


def test_an_end_at_the_edge_of_the_time_range_is_judged_as_a_json_line_is(chdb_dir: Path, database: str,
                                                                           tmp_path: Path) -> None:
    """The select sends times as numbers, the end as NULL outside the range. An end of 2^63 - 2 is
    read; 2^63 - 1 (where DuckDB's nanosecond timestamps end) and 2^63 (past Int64) are refused for
    the JSON lines' reason, naming the row, exactly as the file path judges the same times."""
    template = _good_rows()[2]
    rows = {end: [*template] for end in (2**63 - 2, 2**63 - 1, 2**63)}
    for end, row in rows.items():
        row[2], row[12] = hex_id(f"edge-{end}", 16), end - template[0]
    _fill(chdb_dir, database, [template, *rows.values()])
    with pytest.raises(ClickHouseBadRows) as caught:
        open_ch(chdb_dir, database)
    message = str(caught.value)
    assert message.startswith("2 row(s) of chdb://")
    for end in (2**63 - 1, 2**63):
        assert (f"span {rows[end][2]!r}: a span's startTimeUnixNano or endTimeUnixNano is not an integer in "
                "[0, 2^63 - 1)") in message
    with open_ch(chdb_dir, database, skip_bad_rows=True) as ch:
        assert ch.connection.execute("SELECT end_time_unix_nano FROM spans WHERE span_id = $s",
                                     {"s": rows[2**63 - 2][2]}).fetchall() == [(2**63 - 2,)]
    for end in rows:
        line = service_line("crew", [otlp_span_json(hex_id("t", 32), hex_id("s", 16), "", template[0], end,
                                                    {c.GEN_AI_TOOL_NAME: "t"})])
        path = write_lines(tmp_path / f"edge-{end}.jsonl", [line])
        if end > 2**63 - 2:
            with pytest.raises(ForensicsInputError, match=r"line 1: .*endTimeUnixNano is not an integer in"):
                open_traces([path])
        else:
            with open_traces([path]) as traces:
                assert traces.connection.execute("SELECT end_time_unix_nano FROM spans").fetchall() == [(end,)]


def test_an_end_before_its_start_is_refused(chdb_dir: Path, database: str) -> None:
    """A table whose Duration is Int64 (the schema accepts it) can hold an end before its start."""
    client = client_for(chdb_dir)
    try:
        create(client, database, "otel_traces")
        client.command(f"ALTER TABLE {database}.otel_traces MODIFY COLUMN Duration Int64")
        row = _good_rows()[0]
        row[12] = -1000
        client.command(f"ALTER TABLE {database}.otel_traces_staging MODIFY COLUMN Duration Int64")
        insert_rows(client, [row], database)
    finally:
        client.close()
    with pytest.raises(ClickHouseBadRows, match=f"span {row[2]!r}: a span ends before it starts"):
        open_ch(chdb_dir, database)


def test_hostile_map_keys_and_values_are_data(chdb_dir: Path, database: str) -> None:
    """A map key and a value built to break out of SQL quoting are never spliced: the value read
    comes back intact, the hostile key is not read, and every table is still there."""
    rows = _good_rows()
    rows[0][11] = {**rows[0][11], HOSTILE_KEY: HOSTILE_VALUE, c.GEN_AI_TOOL_NAME: HOSTILE_VALUE}
    _fill(chdb_dir, database, rows)
    with open_ch(chdb_dir, database) as ch:
        names = {r[0] for r in ch.connection.execute("SELECT tool_name FROM spans").fetchall()}
        assert HOSTILE_VALUE in names and ch.load_report.spans == len(rows)
        keys = {k for r in ch.connection.execute("SELECT attribute_keys FROM spans").fetchall() for k in r[0]}
        assert HOSTILE_KEY not in keys
    client = client_for(chdb_dir)
    try:
        assert client.query(f"SELECT count() FROM {database}.otel_traces").result_rows[0][0] == len(rows)
    finally:
        client.close()


def test_the_cli_refuses_bad_rows_with_exit_2_and_skips_them_when_told(
        chdb_dir: Path, database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`forensics report --clickhouse` exits 2 naming the rows; --skip-bad-lines reads the rest."""
    good = _good_rows()
    _fill(chdb_dir, database, good + [_bad_rows(good[2])["a span's spanId is not 16 hex characters"]])
    args = ["report", "--clickhouse", f"chdb://{chdb_dir}", "--table", f"{database}.otel_traces", "--last", "1d", "-q"]
    assert forensics_main(args) == 2
    assert "span '': a span's spanId is not 16 hex characters" in capsys.readouterr().err
    assert forensics_main([*args, "--skip-bad-lines", "--format", "json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["evidence"]["rows_skipped"]["count"] == 1 and "malformed row" in out.err


def _skew_lines() -> list[str]:
    """Tool spans of `planner` whose parents are `gateway` server spans (not tool spans) with a
    clock a second ahead, and an unrelated gateway span that parents nothing read."""
    run = {c.GEN_AI_CONVERSATION_ID: "skew"}
    gateway, planner = [], []
    for i in range(4):
        trace, parent = hex_id(f"t{i}", 32), hex_id(f"g{i}", 16)
        gateway.append(otlp_span_json(trace, parent, "", ns(10 * i) + 10**9, ns(10 * i + 2) + 10**9, run))
        planner.append(otlp_span_json(trace, hex_id(f"c{i}", 16), parent, ns(10 * i + 0.5), ns(10 * i + 1),
                                      {**run, c.GEN_AI_TOOL_NAME: "plan", c.TOOL_KIND: c.KIND_READ,
                                       c.STATE_KEY: "k", c.STATE_VERSION_READ: "1"}))
    gateway.append(otlp_span_json(hex_id("t0", 32), hex_id("lonely", 16), "", ns(0), ns(1), run))
    return shifted_lines([service_line("gateway", gateway), service_line("planner", planner)], SHIFT_NS)


def test_non_tool_parents_are_read_so_skew_through_them_is_seen(chdb_dir: Path, database: str,
                                                                 tmp_path: Path) -> None:
    """Skew seen only between a tool span and its non-tool parent of another service is detected
    from ClickHouse as from files; a non-tool span that parents no tool span is not read."""
    lines = _skew_lines()
    _fill(chdb_dir, database, list(exporter_rows(lines)))
    with open_traces([write_lines(tmp_path / "t.jsonl", lines)]) as files, open_ch(chdb_dir, database) as ch:
        skew = files.evidence.as_dict()["clock_skew"]["services"]
        assert skew and skew[0]["service_name"] == "planner"
        assert ch.evidence.as_dict()["clock_skew"]["services"] == skew
        assert ch.load_report.parent_spans == 4 and ch.load_report.spans == files.load_report.spans - 1
        assert hex_id("lonely", 16) not in {r[0] for r in ch.connection.execute("SELECT span_id FROM spans").fetchall()}
        for name in QUESTION_NAMES:
            assert ch.run(name) == files.run(name), name
        basis = ch.evidence.as_dict()["clock_skew"]["judged_on"]
        assert basis.startswith("tool spans and their 4 parent span(s)")
        assert files.evidence.as_dict()["clock_skew"]["judged_on"] == "every parent/child pair read"


def test_skipped_bad_rows_leave_the_parent_count_as_the_rows_kept(chdb_dir: Path, database: str) -> None:
    """A bad parent row and a bad tool row skipped: the evidence's parent spans are the three
    parents kept (the count comes from the select's own tool rule, less the skipped parents)."""
    rows = [list(r) for r in exporter_rows(_skew_lines())]
    parent = next(r for r in rows if r[2] == hex_id("g0", 16))
    tool = next(r for r in rows if r[2] == hex_id("c1", 16))
    parent[12] = tool[12] = 2**64 - 1  # the end past 2^63: a bad row
    _fill(chdb_dir, database, rows)
    with open_ch(chdb_dir, database, skip_bad_rows=True) as ch:
        assert ch.load_report.skipped_row_count == 2
        assert ch.load_report.parent_spans == 3
        assert ch.evidence.as_dict()["clock_skew"]["judged_on"].startswith("tool spans and their 3 parent span(s)")
        reasons = {r["span_id"]: r["reason"] for r in ch.evidence.as_dict()["rows_skipped"]["rows"]}
        assert reasons[hex_id("g0", 16)].startswith("a span's startTimeUnixNano or endTimeUnixNano")


def test_skew_only_between_other_spans_is_not_seen_and_the_evidence_says_so(
        chdb_dir: Path, database: str, tmp_path: Path) -> None:
    """A grandparent pair (two non-tool spans of different services) is skew the file path sees
    and ClickHouse cannot: the order-dependent questions' caveats and the text evidence say what
    the skew check was judged on."""
    run = {c.GEN_AI_CONVERSATION_ID: "deep"}
    edge, server, tools = [], [], []
    for i in range(3):
        trace, top, middle = hex_id(f"d{i}", 32), hex_id(f"e{i}", 16), hex_id(f"m{i}", 16)
        edge.append(otlp_span_json(trace, top, "", ns(10 * i) + 10**9, ns(10 * i + 3) + 10**9, run))
        server.append(otlp_span_json(trace, middle, top, ns(10 * i + 0.1), ns(10 * i + 2), run))
        tools.append(otlp_span_json(trace, hex_id(f"x{i}", 16), middle, ns(10 * i + 0.5), ns(10 * i + 1),
                                    {**run, c.GEN_AI_TOOL_NAME: "plan", c.TOOL_KIND: c.KIND_READ,
                                     c.STATE_KEY: "k", c.STATE_VERSION_READ: "1"}))
    lines = shifted_lines([service_line("edge", edge), service_line("server", server + tools)], SHIFT_NS)
    _fill(chdb_dir, database, list(exporter_rows(lines)))
    with open_traces([write_lines(tmp_path / "t.jsonl", lines)]) as files, open_ch(chdb_dir, database) as ch:
        assert [s["service_name"] for s in files.evidence.as_dict()["clock_skew"]["services"]] == ["server"]
        assert ch.evidence.as_dict()["clock_skew"]["services"] == []
        caveats = " ".join(ch.evidence.caveats("lost_updates"))
        assert "judged on tool spans and the 3 span(s) that parent them" in caveats
        assert "skew seen only between other spans is not detected" in caveats
        assert not any("judged on tool spans" in n for n in files.evidence.caveats("lost_updates"))
        assert "judged on tool spans and their 3 parent span(s) only" in "\n".join(ch.evidence.render())


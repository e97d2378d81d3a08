"""ClickHouse ``otel_traces`` on the real ClickHouse engine, in process (chDB), against the file path.

The table is the Collector clickhouseexporter's DDL; the rows are the JSON-lines fixtures as the
exporter writes them (see ``clickhouse_support``), with recent timestamps so the TTL keeps them.
Every question must answer exactly as it does on the same spans read from JSON lines.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.exceptions import ClickHouseInputError, ClickHouseSchemaError, ClickHouseTableMissing, TooManySpans
from telemetry.forensics import QUESTION_NAMES, Forensics, open_clickhouse, open_traces
from telemetry.forensics._cli import main as forensics_main

from clickhouse_support import COLUMNS, create, exporter_rows, insert_rows, shifted_lines, write_lines
from forensics_builder import T0_S, TraceBuilder, attrs, hex_id, ns, otlp_span_json, service_line
from forensics_incidents import planted

MINUTE_NS = 60_000_000_000
SHIFT_NS = (time.time_ns() // MINUTE_NS) * MINUTE_NS - 2 * 3600 * 10**9 - T0_S * 10**9
"""Moves the fixtures' 2023 times to two hours ago, on a minute boundary (contention buckets)."""


def client_for(chdb_dir: Path) -> Any:
    import clickhouse_connect

    return clickhouse_connect.get_client(dsn=f"chdb://{chdb_dir}")


def load_exported(chdb_dir: Path, database: str, lines: list[str]) -> None:
    """Create the exporter's tables in ``database`` and insert the OTLP JSON ``lines`` as its rows."""
    from clickhouse_support import create, exporter_rows, insert_rows

    client = client_for(chdb_dir)
    try:
        create(client, database)
        insert_rows(client, list(exporter_rows(lines)), database)
    finally:
        client.close()


@pytest.fixture(scope="module", autouse=True)
def engine_kept_up(chdb_dir: Path) -> Iterator[None]:
    """One chDB connection held open for a module's tests (the other ClickHouse modules import it).

    While a connection is open the in-process engine stays up, so each client and each
    ``open_clickhouse`` a test makes connects at no cost; with none open every connect starts the
    engine again, reloading each table the process has made, a cost every connect would pay."""
    import chdb

    held = chdb.connect(str(chdb_dir))
    try:
        yield
    finally:
        held.close()  # before the interpreter exits (chDB crashes on a connection left open)


def load_both(builder: TraceBuilder, tmp: Path, chdb_dir: Path, database: str, *, old_spellings: bool = False,
              per_line: int = 5) -> Path:
    """Write ``builder``'s spans as shifted JSON lines and insert the same spans into ClickHouse."""
    lines = shifted_lines(builder.lines(per_line=per_line), SHIFT_NS)
    client = client_for(chdb_dir)
    try:
        create(client, database)
        insert_rows(client, list(exporter_rows(lines, old_spellings=old_spellings)), database)
    finally:
        client.close()
    return write_lines(tmp / "traces.jsonl", lines)


def fill_many(client: Any, database: str, copies: int) -> None:
    """One read span as the exporter writes it, copied ``copies`` times with its own span id, run
    (300 of them), key and time. The copies are made by the engine from the one inserted row (the
    same rows as building each in Python: ids are the same SHA-256 prefixes and zero-padded
    counters), since sending them through the client cost a second and tested nothing more."""
    b = TraceBuilder()
    b.add("run-0", "read_state", c.KIND_READ, "a", 0.0, attrs=attrs(STATE_KEY="k0", STATE_VERSION_READ=0))
    template = next(exporter_rows(shifted_lines(b.lines(), SHIFT_NS)))
    source = f"{database}_template"
    create(client, database)
    create(client, source)
    try:
        insert_rows(client, [template], source)
        client.command(
            f"INSERT INTO {database}.otel_traces ({', '.join(COLUMNS)}) SELECT "
            "Timestamp + toIntervalNanosecond(number * 10000000), "
            "lower(left(hex(SHA256(concat('trace:run-', toString(number % 300)))), 32)), "
            f"leftPad(lower(hex(number + 1)), 16, '0'), {', '.join(COLUMNS[3:11])}, "
            "mapUpdate(SpanAttributes, map({run:String}, concat('run-', toString(number % 300)), "
            "{key:String}, concat('k', toString(number)), {read:String}, toString(number))), "
            f"{', '.join(COLUMNS[12:])} FROM {source}.otel_traces AS template, numbers({{copies:UInt64}}) AS copies",
            parameters={"run": c.GEN_AI_CONVERSATION_ID, "key": c.STATE_KEY, "read": c.STATE_VERSION_READ,
                        "copies": copies})
    finally:
        client.command(f"DROP DATABASE IF EXISTS {source}")


def open_ch(chdb_dir: Path, database: str, **options: Any) -> Forensics:
    options.setdefault("last", "1d")
    options.setdefault("table", f"{database}.otel_traces")
    return open_clickhouse(f"chdb://{chdb_dir}", **options)


@pytest.fixture(scope="module")
def planted_load(tmp_path_factory: pytest.TempPathFactory, chdb_dir: Path) -> Callable[[str], tuple[Path, str]]:
    """``(JSON-lines file, database)`` of the planted incidents in one spelling ("current" or
    "older"), loaded on first use and shared by this module's tests that only read them (a fresh
    load per test cost seconds of the suite)."""
    loads: dict[str, tuple[Path, str]] = {}

    def get(spelling: str) -> tuple[Path, str]:
        if spelling not in loads:
            database = f"otel_{os.getpid()}_planted_{spelling}"
            tmp = tmp_path_factory.mktemp(f"planted-{spelling}")
            loads[spelling] = (load_both(planted(), tmp, chdb_dir, database, old_spellings=spelling == "older"), database)
        return loads[spelling]

    return get


@pytest.fixture(scope="module", params=["current", "older"])
def both(request: pytest.FixtureRequest, planted_load: Callable[[str], tuple[Path, str]],
         chdb_dir: Path) -> Iterator[tuple[Forensics, Forensics]]:
    path, database = planted_load(request.param)
    with open_traces([path]) as files, open_ch(chdb_dir, database) as ch:
        yield files, ch


def test_every_question_answers_on_clickhouse_exactly_as_on_json_lines(both: tuple[Forensics, Forensics]) -> None:
    files, ch = both
    assert ch.load_report.spans == files.load_report.spans == len(planted().spans)
    for name in QUESTION_NAMES:
        expected = files.run(name)
        assert ch.run(name) == expected, name
    # the fixture plants each of our own crew's incidents (the peer questions have their own story:
    # test_forensics_peer_story.py, ClickHouse included; the retry tax has its own in
    # test_forensics_retry_tax.py)
    assert all(files.run(n) for n in QUESTION_NAMES if n not in ("masked_failures", "repeated_executions",
                                                                  "retry_tax"))
    assert _comparable(ch.evidence.as_dict()) == _comparable(files.evidence.as_dict())


def test_the_spans_relation_has_the_file_paths_columns_and_types(both: tuple[Forensics, Forensics]) -> None:
    files, ch = both
    described = [row[:2] for row in files.connection.execute("DESCRIBE spans").fetchall()]
    assert [row[:2] for row in ch.connection.execute("DESCRIBE spans").fetchall()] == described
    columns = ("run_id, trace_id, span_id, parent_span_id, name, kind, status_code, status_message, "
               "start_time_unix_nano, end_time_unix_nano, service_name, scope_name, tool_name, tool_kind, "
               "delegation_hop, constraints_carried, deduplicated, plan_changed_count")
    order = " ORDER BY trace_id, span_id"
    assert (ch.connection.execute(f"SELECT {columns} FROM spans{order}").fetchall()
            == files.connection.execute(f"SELECT {columns} FROM spans{order}").fetchall())


def test_report_names_the_table_and_window_and_its_detail_commands_repeat_them(
        both: tuple[Forensics, Forensics]) -> None:
    _, ch = both
    report = ch.report()
    text = report.render()
    headline = " ".join(text.split("\nwarning:")[0].split("\n")[:4])  # the headline, wrapped
    assert "spans from chdb://" in headline and "otel_traces" in headline
    commands = [q["command"] for q in report.as_dict()["questions"] if "command" in q]
    assert commands and all(cmd[2] == "run" and cmd[4:6] == ["--clickhouse", ch.load_report.source.split(" table ")[0]]
                            and "--since" in cmd and "--until" in cmd for cmd in commands)
    assert "--clickhouse" in text and "--since" in text


def _typing_builder() -> TraceBuilder:
    b = TraceBuilder()
    b.add("typing-run", "delegate", c.KIND_DELEGATE, "lead", 1.0, attrs={
        **attrs(DELEGATION_TASK_ID="t2", DELEGATION_ROOT_TASK_ID="t1", DELEGATION_HOP=2),
        c.DELEGATION_CONSTRAINTS_CARRIED: ["C<1>", "C&2", 'say "hi"'],
        c.TOOL_DEDUPLICATED: True})
    b.add("typing-run", "write_state", c.KIND_WRITE, None, 2.0, outcome=c.OUTCOME_REJECTED_STALE_VERSION,
          attrs=attrs(STATE_KEY="", STATE_VERSION_EXPECTED=7))
    b.add("no-conversation", "read_state", c.KIND_READ, "a", 3.0, conversation=False,
          attrs=attrs(STATE_KEY="k", STATE_VERSION_READ=3))
    return b


def test_type_mapping_arrays_with_escapes_ints_as_text_empty_values_and_absent_keys(
        tmp_path: Path, chdb_dir: Path, database: str) -> None:
    """Arrays come back as lists (Go's \\u003c escapes undone), ints as numbers, '' stays '', a
    missing key is NULL, a span without a conversation id is its trace's run."""
    b = _typing_builder()
    path = load_both(b, tmp_path, chdb_dir, database)
    query = ("SELECT run_id, tool_kind, constraints_carried, delegation_hop, deduplicated, state_key, "
             "state_version_expected, agent_id, kind, status_code, status_message FROM spans ORDER BY start_time")
    with open_traces([path]) as files, open_ch(chdb_dir, database) as ch:
        rows = ch.connection.execute(query).fetchall()
        assert rows == files.connection.execute(query).fetchall()
    assert rows[0][2] == ["C<1>", "C&2", 'say "hi"'] and rows[0][3] == 2 and rows[0][4] is True
    assert rows[1][5] == "" and rows[1][6] == "7" and rows[1][7] is None
    assert rows[1][9] == "error" and rows[1][10] == c.OUTCOME_REJECTED_STALE_VERSION
    assert rows[2][0] == b.spans[2].trace_id and rows[2][8] == "internal" and rows[2][9] == "unset"


def test_a_run_crossing_the_window_edge_is_read_whole_and_others_not_at_all(
        tmp_path: Path, chdb_dir: Path, database: str) -> None:
    b = TraceBuilder()
    b.add("crossing", "read_state", c.KIND_READ, "a", 0.0, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ=1))
    b.add("crossing", "write_state", c.KIND_WRITE, "a", 600.0, attrs=attrs(STATE_KEY="k", STATE_VERSION_EXPECTED=1))
    b.add("outside", "read_state", c.KIND_READ, "b", 5.0, attrs=attrs(STATE_KEY="j", STATE_VERSION_READ=1))
    load_both(b, tmp_path, chdb_dir, database)
    start = T0_S * 10**9 + SHIFT_NS
    since, until = _iso(start + 300 * 10**9), _iso(start + 900 * 10**9)
    with open_ch(chdb_dir, database, last=None, since=since, until=until) as ch:
        rows = ch.connection.execute("SELECT run_id, tool_name FROM spans ORDER BY start_time").fetchall()
    assert rows == [("crossing", "read_state"), ("crossing", "write_state")]


def _iso(ns: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).isoformat()


def test_a_hostile_service_name_is_bound_and_selects_only_its_own_runs(
        tmp_path: Path, chdb_dir: Path, database: str) -> None:
    hostile = "crew' OR 1=1) --\\"
    b = TraceBuilder()
    b.add("r1", "read_state", c.KIND_READ, "a", 0.0, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ=1))
    lines = [line.replace('"crew"', '"' + hostile.replace("\\", "\\\\") + '"')
             for line in shifted_lines(b.lines(), SHIFT_NS)]
    other = shifted_lines(TraceBuilder([b.spans[0].__class__("r2", "read_state", c.KIND_READ, "z", 1.0,
                                                             attrs(STATE_KEY="q", STATE_VERSION_READ=2))]).lines(),
                          SHIFT_NS)
    client = client_for(chdb_dir)
    create(client, database)
    insert_rows(client, list(exporter_rows(lines + other)), database)
    client.close()
    with open_ch(chdb_dir, database, service=hostile) as ch:
        assert ch.connection.execute("SELECT run_id, service_name FROM spans").fetchall() == [("r1", hostile)]
    with open_ch(chdb_dir, database, service="crew") as ch:
        assert [r[0] for r in ch.connection.execute("SELECT run_id FROM spans").fetchall()] == ["r2"]


def test_more_spans_than_max_spans_is_refused_with_what_to_do(chdb_dir: Path, planted_load: Callable[[str], tuple[Path, str]]) -> None:
    _, database = planted_load("current")
    with pytest.raises(TooManySpans, match="more than --max-spans 10 .*narrow the window"):
        open_ch(chdb_dir, database, max_spans=10)
    with open_ch(chdb_dir, database, max_spans=len(planted().spans)) as ch:
        assert ch.load_report.spans == len(planted().spans)


def test_a_read_that_fails_part_way_through_is_named_and_the_engine_reads_on(chdb_dir: Path, database: str) -> None:
    # The URL's settings reach the in-process engine: a result limit the read passes part-way,
    # so the engine fails while it streams. The failure is named in its words, and the next read
    # on the same engine is whole (a failed stream poisons no later query).
    client = client_for(chdb_dir)
    try:
        fill_many(client, database, 30_000)
    finally:
        client.close()
    limited = f"chdb://{chdb_dir}?max_result_rows=20000&result_overflow_mode=throw"
    with pytest.raises(ClickHouseInputError, match=r"while reading spans.*(?i:limit for result|TOO_MANY_ROWS)"):
        open_clickhouse(limited, last="1d", table=f"{database}.otel_traces")
    with open_ch(chdb_dir, database) as ch:
        assert ch.load_report.spans == 30_000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(max_size=24))
@example(value="a&readonly=1").via("a setting smuggled into another's value")
@example(value="").via("an empty value, which chDB reads as 1")
@example(value="it's \"quoted\" \\ + %41 = ok")
def test_a_url_setting_reaches_chdb_exactly_or_is_refused_by_name(chdb_dir: Path, value: str) -> None:
    from telemetry.forensics.clickhouse import connect
    from telemetry.forensics.clickhouse._select import SpansSelect

    url = f"chdb://{chdb_dir}?log_comment={quote(value, safe='')}"
    try:
        connection = connect(url)
    except ClickHouseInputError as refused:  # only what chDB's connection string cannot carry
        assert "log_comment" in str(refused) and (value == "" or "&" in value or "\x00" in value)
        return
    try:
        with connection.stream(SpansSelect("SELECT getSetting('log_comment') AS v", {}), "reading") as batches:
            assert [v for batch in batches for v in batch.column(0).to_pylist()] == [value]
    finally:
        connection.close()


def test_a_missing_table_and_a_table_of_another_shape_are_named(chdb_dir: Path, database: str) -> None:
    client = client_for(chdb_dir)
    client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    client.command(f"CREATE TABLE {database}.otel_traces (Timestamp DateTime64(9), TraceId String) "
                   "ENGINE = MergeTree ORDER BY Timestamp")
    client.close()
    with pytest.raises(ClickHouseTableMissing, match=f"no table {database}.nope"):
        open_ch(chdb_dir, database, table=f"{database}.nope")
    with pytest.raises(ClickHouseSchemaError, match="has no column SpanId"):
        open_ch(chdb_dir, database)
    with pytest.raises(ClickHouseInputError, match="not a plain identifier"):
        open_ch(chdb_dir, database, table=f"{database}.otel_traces`; DROP TABLE x")


def test_an_empty_window_loads_no_spans_and_says_so(chdb_dir: Path, planted_load: Callable[[str], tuple[Path, str]]) -> None:
    _, database = planted_load("current")
    with open_ch(chdb_dir, database, last=None, since="2001-01-01T00:00:00Z", until="2001-01-02T00:00:00Z") as ch:
        assert ch.load_report.spans == 0
        assert all(not ch.run(n) for n in QUESTION_NAMES)
        assert any("no tool spans in" in w for w in ch.load_report.warnings())


def test_cli_reads_clickhouse_and_refuses_paths_with_it(tmp_path: Path, chdb_dir: Path,
                                                        planted_load: Callable[[str], tuple[Path, str]],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _, database = planted_load("current")
    url = f"chdb://{chdb_dir}"
    args = ["--clickhouse", url, "--table", f"{database}.otel_traces", "--last", "1d", "-q"]
    assert forensics_main(["report", *args, "--fail-on", "warning"]) == 1
    assert "finding(s)" in capsys.readouterr().out
    assert forensics_main(["run", "stale_sends", *args, "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 2
    assert forensics_main(["report", str(tmp_path), "--clickhouse", url]) == 2
    assert "not both" in capsys.readouterr().err
    assert forensics_main(["report", *args, "--last", "6x"]) == 2
    assert "not a duration" in capsys.readouterr().err


def test_a_missing_chdb_directory_is_refused_by_name_and_nothing_is_created(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`chdb:///missing` (a mistyped path): exit 2 naming it, and no empty data directory left
    behind (chDB would create one and every read would then say "no table"); a file is refused too."""
    missing = tmp_path / "no such chdb"
    assert forensics_main(["report", "--clickhouse", f"chdb://{missing}", "--last", "1h", "-q"]) == 2
    err = capsys.readouterr().err
    assert f"chdb://{missing}: no chDB data directory there" in err
    assert not missing.exists()
    with pytest.raises(ClickHouseInputError, match="no chDB data directory"):
        open_clickhouse(f"chdb://{missing}", last="1h")
    assert not missing.exists()
    afile = tmp_path / "spans.jsonl"
    afile.write_text("")
    with pytest.raises(ClickHouseInputError, match="is a file, not a chDB data directory"):
        open_clickhouse(f"chdb://{afile}", last="1h")


def _evidence_lines() -> tuple[list[str], list[str], list[str]]:
    """Spans that exercise every evidence rule: clock skew between two services, chains without a
    root and with a gap, spans whose kind is inferred or undecided; then an identical copy of some
    lines and a differing copy of one span (as a Collector retry or a second pipeline writes)."""
    run = {c.GEN_AI_CONVERSATION_ID: "skew", c.GEN_AI_TOOL_NAME: "t"}
    planner, billing = [], []
    for i in range(5):  # billing's clock is a second behind: its child spans start before their parents
        trace, parent = hex_id(f"t{i}", 32), hex_id(f"p{i}", 16)
        planner.append(otlp_span_json(trace, parent, "", ns(10 * i), ns(10 * i + 1), run))
        billing.append(otlp_span_json(trace, hex_id(f"c{i}", 16), parent, ns(10 * i + 0.2) - 10**9,
                                  ns(10 * i + 0.5) - 10**9, run))
    skew = [service_line("planner", planner), service_line("billing", billing)]
    b = TraceBuilder()
    for name, root, middle in (("no-root", False, True), ("gap", True, False)):
        if root:
            b.add(name, "register_task", c.KIND_DELEGATE, "p", 1, attrs=attrs(
                DELEGATION_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=0,
                DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2"]))
        if middle:
            b.add(name, "delegate", c.KIND_DELEGATE, "p", 2, attrs=attrs(
                DELEGATION_TASK_ID="T.1", DELEGATION_ORIGIN_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T",
                DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2"]))
        b.add(name, "delegate", c.KIND_DELEGATE, "q", 3, attrs=attrs(
            DELEGATION_TASK_ID="T.1.1", DELEGATION_ORIGIN_TASK_ID="T.1", DELEGATION_ROOT_TASK_ID="T",
            DELEGATION_HOP=2, DELEGATION_CONSTRAINTS_CARRIED=["C1"]))
    b.add("infer", "fetch", None, "a", 4, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v1"))
    b.add("infer", "store", None, "a", 5, attrs=attrs(STATE_KEY="k", STATE_VERSION_WRITTEN="v2"))
    b.add("infer", "odd", None, "a", 6, attrs=attrs(STATE_VERSION_READ="v1", POLICY_VERSION="1"))
    b.add("infer", "other", None, "a", 7, attrs=attrs(STATE_KEY="k"))
    main = shifted_lines(skew + b.lines(per_line=3), SHIFT_NS)
    copies = main[2:4]
    b.spans = b.spans[:1]
    b.spans[0].attributes = {}  # the same ids, fewer attributes
    differing = shifted_lines(b.lines(), SHIFT_NS)
    return main, copies, differing


def _comparable(evidence: dict[str, Any]) -> dict[str, Any]:
    """The evidence without what names the source (files, file names in copies and warnings)."""
    out = {k: v for k, v in evidence.items() if k not in ("files", "warnings")}
    out["duplicates"] = {k: v for k, v in evidence["duplicates"].items() if k not in ("dropped_by_file", "conflicts")}
    # what the skew check was judged on differs by source by design (see test_forensics_clickhouse_rows)
    out["clock_skew"] = {k: v for k, v in evidence["clock_skew"].items() if k not in ("judged_on", "parent_spans")}
    return out


def test_the_evidence_rules_apply_to_clickhouse_spans_as_to_files(tmp_path: Path, chdb_dir: Path,
                                                                  database: str) -> None:
    """Copies dropped, kinds inferred, chains without root or with a gap, clock skew: the same
    evidence, and the same answers, from ClickHouse as from files holding the same spans."""
    main, copies, differing = _evidence_lines()
    files = [write_lines(tmp_path / "a.jsonl", main), write_lines(tmp_path / "b.jsonl", copies),
             write_lines(tmp_path / "c.jsonl", differing)]
    client = client_for(chdb_dir)
    create(client, database)
    insert_rows(client, list(exporter_rows(main + copies + differing)), database)
    client.close()
    with open_traces(files) as from_files, open_ch(chdb_dir, database) as ch:
        expected = from_files.evidence.as_dict()
        assert expected["duplicates"]["dropped"] > 1 and expected["duplicates"]["conflicting"] == 1
        assert expected["clock_skew"]["services"] and expected["chains_with_gaps"]["count"] == 1
        assert expected["chains_without_root"]["count"] == 1 and expected["tool_kind_inferred"]
        # ten skew spans and one with only a key decide no kind; one has attributes of two kinds
        assert expected["spans_ignored"] == {"no tool.kind, no attribute decides it": 11,
                                             "no tool.kind, attributes of more than one kind": 1}
        assert _comparable(ch.evidence.as_dict()) == _comparable(expected)
        for name in QUESTION_NAMES:
            assert ch.run(name) == from_files.run(name), name
        assert any("duplicate" in w for w in ch.evidence.warnings())

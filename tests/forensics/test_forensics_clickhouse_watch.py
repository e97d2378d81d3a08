"""``watch --clickhouse``: each pass reads the window's runs from ``otel_traces`` and counts each new
finding once, across passes and restarts, on chDB in process and through the real
clickhouse-connect HTTP client (a loopback stand-in server answering from chDB; ``CLICKHOUSE_URL``
points the HTTP test at a real server). An unreachable server is a named, counted failed pass."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from telemetry import conventions as c
from telemetry.exceptions import ClickHouseInputError, ClickHouseUnreachable, TooManySpans
from telemetry.forensics import open_traces
from telemetry.forensics.watch import Watcher, WatchOptions, watched_questions
from telemetry.forensics.watch._cli import main as watch_main
from telemetry.forensics.watch._clickhouse import ClickHouseSource
from telemetry.forensics.watch._findings import counted

from chdb_http import ChdbHttpServer, closed_port, session_for
from clickhouse_support import create, exporter_rows, insert_rows, shifted_lines, write_lines
from forensics_builder import TraceBuilder
from forensics_incidents import planted
from test_forensics_clickhouse import SHIFT_NS, client_for, engine_kept_up  # noqa: F401  (autouse fixture)
from test_forensics_clickhouse_http import PASSWORD, server  # noqa: F401  (the fixture)
from test_forensics_clickhouse_rows import _fill

FIRST_RUNS = frozenset({"r-split", "r-legacy", "r-div", "r-del", "r-silent"})
"""The runs inserted before the first pass; the rest of the planted incidents come later."""


def _parts() -> tuple[list[str], list[str]]:
    """The planted incidents as exporter lines: the first runs, then the others."""
    spans = planted().spans
    first = TraceBuilder([s for s in spans if s.run in FIRST_RUNS])
    later = TraceBuilder([s for s in spans if s.run not in FIRST_RUNS])
    return shifted_lines(first.lines(), SHIFT_NS), shifted_lines(later.lines(), SHIFT_NS)


def _expected_keys(lines: list[str], tmp: Path) -> set[str]:
    """The findings forensics itself reports over ``lines`` (files), that the watcher counts."""
    with open_traces([write_lines(tmp / f"expected-{len(lines)}.jsonl", lines)]) as traces:
        return {key for name in watched_questions() for key in counted(name, traces.run(name))}


def _total(registry: CollectorRegistry) -> float:
    return sum(registry.get_sample_value(c.METRIC_FORENSIC_FINDINGS_TOTAL, {c.LABEL_QUESTION: n}) or 0.0
               for n in watched_questions())


def _watcher(url: str, state: Path, **source: Any) -> Watcher:
    options = WatchOptions(settle=0.0, window=86400.0, state=state, clickhouse=ClickHouseSource(url, **source))
    return Watcher(options, registry=CollectorRegistry())


def _insert(client: Any, database: str, lines: list[str]) -> None:
    insert_rows(client, list(exporter_rows(lines)), database)


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], set[str]]:
    """The finding keys forensics reports over the first runs, and over all of them (read from
    files once for the module: both tests below compare against the same two sets)."""
    first, later = _parts()
    tmp = tmp_path_factory.mktemp("expected")
    before, after = _expected_keys(first, tmp), _expected_keys(first + later, tmp)
    assert before and after - before, "the planted incidents must give findings in both parts"
    return before, after


def _passes_count_new_findings_once(url: str, client: Any, database: str, tmp: Path,
                                    expected: tuple[set[str], set[str]], **source: Any) -> None:
    first, later = _parts()
    before, after = expected
    create(client, database)
    _insert(client, database, first)
    state = tmp / "watch.json"
    w = _watcher(url, state, **source)
    try:
        one = w.run_pass()
        assert {f.key for f in one.new} == before and _total(w.registry) == len(before)
        assert w.registry.get_sample_value(c.METRIC_WATCH_LINES_READ_TOTAL) == one.lines == one.spans > 0
        _insert(client, database, later)
        two = w.run_pass()
        assert {f.key for f in two.new} == after - before
        assert w.run_pass().new == []
        assert _total(w.registry) == len(before | after)
        assert w.registry.get_sample_value(c.METRIC_WATCH_WINDOW_SPANS) == len(planted().spans)
        assert w.registry.get_sample_value(c.METRIC_WATCH_PASS_FAILURES_TOTAL) == 0
    finally:
        w.close()
    restarted = _watcher(url, state, **source)
    try:
        assert restarted.run_pass().new == [] and _total(restarted.registry) == 0
    finally:
        restarted.close()


def test_rows_inserted_between_passes_count_exactly_the_new_findings_once(
        chdb_dir: Path, database: str, tmp_path: Path, expected: tuple[set[str], set[str]]) -> None:
    """On chDB: the first pass counts the first runs' findings, a pass after more rows arrive counts
    exactly the new ones, later passes and a restart with --state count nothing again."""
    client = client_for(chdb_dir)
    try:
        _passes_count_new_findings_once(f"chdb://{chdb_dir}", client, database, tmp_path, expected,
                                        table=f"{database}.otel_traces")
    finally:
        client.close()


def test_watch_over_chdb_needs_no_clickhouse_connect(chdb_dir: Path, database: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The chdb extra does not install clickhouse-connect: `watch --clickhouse chdb://...` starts
    and reads a pass without it (it was refused at start, asking for the clickhouse extra), and an
    http:// URL without it is refused at once naming that extra."""
    first, _ = _parts()
    client = client_for(chdb_dir)
    try:
        create(client, database)
        _insert(client, database, first)
    finally:
        client.close()
    monkeypatch.setitem(sys.modules, "clickhouse_connect", None)
    w = _watcher(f"chdb://{chdb_dir}", tmp_path / "watch.json", table=f"{database}.otel_traces")
    try:
        assert w.run_pass().spans > 0
    finally:
        w.close()
    with pytest.raises(ClickHouseInputError, match=r"\[clickhouse\]"):
        _watcher("http://reader@127.0.0.1:8123/otel", tmp_path / "other.json")


def test_the_same_over_http(server: dict[str, Any], database: str, tmp_path: Path,  # noqa: F811
                            expected: tuple[set[str], set[str]]) -> None:
    """The same through the real clickhouse-connect HTTP client, the password from the environment."""
    _passes_count_new_findings_once(server["url"], server["client"], database, tmp_path, expected)


@pytest.fixture
def session(chdb_dir: Path) -> Iterator[Any]:
    """A chDB session on the test process's engine, for stand-in servers started by the test."""
    opened = session_for(str(chdb_dir))
    try:
        yield opened
    finally:
        opened.close()  # chDB crashes at interpreter exit if a session is left open


def test_an_unreachable_server_is_a_named_counted_failed_pass_and_the_watcher_recovers(
        session: Any, chdb_dir: Path, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], expected: tuple[set[str], set[str]]) -> None:
    """Nothing listens at first: each pass fails with ClickHouseUnreachable, one named error line,
    counted, and the loop goes on; once a server answers on that port the next pass counts the
    findings. (The stand-in only: a real server cannot be started and stopped by the test.)"""
    monkeypatch.setenv("CLICKHOUSE_PASSWORD", PASSWORD)
    port = closed_port()
    url = f"http://reader@127.0.0.1:{port}/{database}?connect_timeout=2"
    w = _watcher(url, tmp_path / "watch.json")
    w.options = dataclasses.replace(w.options, interval=0.05)
    try:
        with pytest.raises(ClickHouseUnreachable, match=f"no answer from http://reader@127.0.0.1:{port}"):
            w.run_pass()
        stop = threading.Event()
        loop = threading.Thread(target=w.run, args=(stop,))
        loop.start()
        deadline = time.monotonic() + 60
        while (w.registry.get_sample_value(c.METRIC_WATCH_PASS_FAILURES_TOTAL) or 0) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        stop.set()
        loop.join(timeout=60)
        err = capsys.readouterr().err
        assert err.count("error: no answer from") >= 2 and "retrying in 0.05 s" in err and "Traceback" not in err
        assert PASSWORD not in err
        _fill(chdb_dir, database, list(exporter_rows(_parts()[0])))
        with ChdbHttpServer(session, "reader", PASSWORD, port=port, path=str(chdb_dir)):
            assert {f.key for f in w.run_pass().new} == expected[0]
    finally:
        w.close()


def test_too_many_spans_and_a_missing_table_fail_the_pass_by_name(chdb_dir: Path, database: str,
                                                                  tmp_path: Path) -> None:
    """--max-spans and a table that is not there are named errors of the pass, not crashes."""
    w = _watcher(f"chdb://{chdb_dir}", tmp_path / "w.json", table=f"{database}.otel_traces", max_spans=3)
    try:
        with pytest.raises(ClickHouseInputError, match=f"no table {database}.otel_traces"):
            w.run_pass()
        _fill(chdb_dir, database, list(exporter_rows(_parts()[0])))
        with pytest.raises(TooManySpans, match="more than --max-spans 3"):
            w.run_pass()
    finally:
        w.close()


def test_a_malformed_row_is_skipped_named_and_counted_once(chdb_dir: Path, database: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           expected: tuple[set[str], set[str]]) -> None:
    """A row with an empty span id is named on stderr and counted in the bad-lines counter once,
    however many passes read it again; the findings of the good rows are counted."""
    first = _parts()[0]
    rows = list(exporter_rows(first))
    bad = [*rows[0]]
    bad[2] = ""
    _fill(chdb_dir, database, rows + [bad])
    w = _watcher(f"chdb://{chdb_dir}", tmp_path / "w.json", table=f"{database}.otel_traces")
    try:
        assert {f.key for f in w.run_pass().new} == expected[0]
        w.run_pass()
        assert w.registry.get_sample_value(c.METRIC_WATCH_BAD_LINES_TOTAL) == 1
        err = capsys.readouterr().err
        assert err.count("span '': a span's spanId is not 16 hex characters; skipped") == 1
    finally:
        w.close()


@pytest.mark.parametrize("argv, message", [
    (["traces", "--clickhouse", "chdb:///x"], "exactly one of them"),
    (["--clickhouse", "http://reader:hunter2@127.0.0.1/otel"], "holds a password"),
    (["--clickhouse", "http://127.0.0.1/otel", "--max-spans", "0"], "--max-spans must be a positive"),
    (["--clickhouse", "http://127.0.0.1/otel", "--table", "otel.x`; DROP"], "not a plain identifier"),
    (["--clickhouse", "http://127.0.0.1/otel", "--service", "crew\udcff"], r"--service 'crew\udcff' is not UTF-8 text"),
])
def test_bad_clickhouse_arguments_exit_2_naming_the_problem(argv: list[str], message: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Mixed inputs, a password in the URL, a bad --max-spans, table name or service (bytes that
    are not UTF-8, as `forensics report` refuses them): exit 2 at once."""
    assert watch_main([*argv, "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert message in err and "hunter2" not in err


def test_the_command_keeps_serving_while_clickhouse_is_unreachable(tmp_path: Path) -> None:
    """In a subprocess: /metrics is served and counts failed passes, each failure is one named line
    on stderr, and SIGTERM ends it with status 0 and no traceback."""
    errors = tmp_path / "stderr"
    url = f"http://reader@127.0.0.1:{closed_port()}/otel?connect_timeout=1"
    with errors.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "watch", "--clickhouse", url,
                                 "--metrics-port", "0", "--interval", "0.2"], stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        metrics = None
        while metrics is None or errors.read_text().count("error: no answer from") < 2:
            assert proc.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, errors.read_text()
            for word in errors.read_text().split():
                if word.startswith("http://127.0.0.1:") and word.endswith("/metrics,"):
                    metrics = word.rstrip(",")
            time.sleep(0.1)
        assert "watching http://reader@127.0.0.1" in errors.read_text()
        with urllib.request.urlopen(metrics, timeout=10) as response:
            text = response.read().decode()
        failures = [line for line in text.splitlines() if line.startswith(c.METRIC_WATCH_PASS_FAILURES_TOTAL)]
        assert failures and float(failures[0].split()[-1]) >= 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in errors.read_text()
        assert "Unexpected Http Driver Exception" not in errors.read_text()  # the named line says it once
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

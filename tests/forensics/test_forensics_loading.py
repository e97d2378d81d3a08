"""Loading OTLP JSON lines: the spec's quirks are accepted, bad input is refused with file and line."""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from telemetry import conventions as c
from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import ingest, open_traces
from telemetry.forensics._loading import PARQUET_ROW_GROUP

from forensics_builder import TraceBuilder, any_value, attrs, ns, otlp_span_json, service_line


def _small() -> TraceBuilder:
    b = TraceBuilder()
    b.add("r1", "write_state", c.KIND_WRITE, "planner", 1, outcome=c.OUTCOME_REJECTED_STALE_VERSION,
          attrs=attrs(STATE_KEY="k", STATE_VERSION_EXPECTED=3, DELEGATION_HOP=2,
                      DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2"], TOOL_DEDUPLICATED=True))
    b.add("r1", "read_state", c.KIND_READ, "billing", 2, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v4"))
    return b


@pytest.mark.parametrize("quirks", [frozenset(), frozenset({"upper"}), frozenset({"numbers"}),
                                    frozenset({"omit"}), frozenset({"enum_names"}), frozenset({"unknown"}),
                                    frozenset({"upper", "numbers", "omit", "unknown"})])
def test_spec_quirks_load_to_the_same_spans(tmp_path: Path, load_file: Callable[[Path], duckdb.DuckDBPyConnection],
                                            quirks: frozenset[str]) -> None:
    """Upper-case ids, numeric int64, omitted kind/status/parent, enum names and unknown fields all load the same."""
    b = _small()
    rows = load_file(b.write(tmp_path / "t.jsonl", quirks)).execute(
        "SELECT trace_id, span_id, parent_span_id, kind, status_code, start_time_unix_nano, run_id, "
        "state_version_expected, delegation_hop, constraints_carried, deduplicated, service_name, outcome "
        "FROM spans ORDER BY start_time_unix_nano").fetchall()
    first = b.spans[0]
    assert rows[0][:2] == (first.trace_id, first.span_id)  # lower-cased whatever the input case
    assert rows[0][2] is None
    assert rows[0][3] == ("unspecified" if "omit" in quirks else "internal")
    assert rows[0][4] == ("unset" if "omit" in quirks else "error")
    assert rows[0][5] == ns(1)
    assert rows[0][6:] == ("r1", "3", 2, ["C1", "C2"], True, "crew", c.OUTCOME_REJECTED_STALE_VERSION)
    assert rows[1][10] is False


def test_every_anyvalue_type_is_kept_and_arrays_stay_lists(tmp_path: Path) -> None:
    """doubleValue, boolValue, bytesValue, kvlistValue and arrays are readable through attr()/attr_list()."""
    span = {"traceId": "AB" * 16, "spanId": "CD" * 8, "name": "x", "startTimeUnixNano": 5, "endTimeUnixNano": "7",
            "attributes": [{"key": "d", "value": {"doubleValue": 1.5}}, {"key": "b", "value": {"boolValue": False}},
                           {"key": "y", "value": {"bytesValue": "aGk="}},
                           {"key": "kv", "value": any_value({"a": "1"})},
                           {"key": "arr", "value": any_value(["x", 2, True])},
                           {"key": "d", "value": {"stringValue": "duplicate key: first wins"}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n")
    with open_traces([path]) as traces:
        row = traces.connection.execute(
            "SELECT attr(attributes, 'd'), attr(attributes, 'b'), attr(attributes, 'y'), attr(attributes, 'kv'), "
            "attr_list(attributes, 'arr'), duration_ms, run_id, service_name FROM spans").fetchall()[0]
    assert row[:3] == ("1.5", "false", "aGk=")
    assert json.loads(row[3]) == {"values": [{"key": "a", "value": {"stringValue": "1"}}]}
    assert row[4] == ["x", "2", "true"]
    assert row[5] == pytest.approx(2e-6)
    assert row[6] == "ab" * 16 and row[7] is None


def test_a_file_lacking_a_value_type_still_binds_every_column(tmp_path: Path) -> None:
    """No boolValue anywhere: the explicit structure still binds deduplicated (auto-detection would not)."""
    b = TraceBuilder()
    b.add("r", "read_state", c.KIND_READ, "a", 1, attrs=attrs(STATE_KEY="k"))
    with open_traces([b.write(tmp_path / "t.jsonl")]) as traces:
        assert traces.connection.execute("SELECT deduplicated, plan_changed_count FROM spans").fetchall() == [(False, None)]


def test_gzip_files_and_directories_and_globs_are_read(tmp_path: Path) -> None:
    """A .jsonl.gz file inside a directory, and a glob, load like a plain file."""
    lines = _small().lines()
    (tmp_path / "d").mkdir()
    with gzip.open(tmp_path / "d" / "x.jsonl.gz", "wt") as out:
        out.write("\n".join(lines) + "\n")
    with open_traces([tmp_path / "d"]) as traces:
        assert traces.load_report.spans == 2
    with open_traces([str(tmp_path / "d" / "*.gz")]) as traces:
        assert traces.load_report.spans == 2


def test_console_exporter_output_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    """The SDK's ConsoleSpanExporter output (pretty-printed, not OTLP) is refused at line 1 with what was expected."""
    buffer = io.StringIO()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=buffer)))
    with provider.get_tracer("t").start_as_current_span("execute_tool x"):
        pass
    provider.shutdown()
    path = tmp_path / "console.json"
    path.write_text(buffer.getvalue())
    with pytest.raises(ForensicsInputError) as caught:
        open_traces([path])
    message = str(caught.value)
    assert str(path) in message and "line 1" in message
    assert "ConsoleSpanExporter" in message and "resourceSpans" in message


def test_otlp_metrics_lines_are_refused_as_not_traces(tmp_path: Path) -> None:
    """Valid JSON lines that are OTLP metrics are refused, naming the line."""
    path = tmp_path / "m.jsonl"
    path.write_text(_small().lines()[0] + "\n" + json.dumps({"resourceMetrics": []}) + "\n")
    with pytest.raises(ForensicsInputError, match=r"line 2: OTLP metrics, not traces"):
        open_traces([path])


def test_malformed_middle_line_fails_unless_skip_bad_lines(tmp_path: Path) -> None:
    """A malformed middle line is an error naming it; --skip-bad-lines reads the rest and reports where."""
    lines = _small().lines(per_line=1)
    path = tmp_path / "t.jsonl"
    path.write_text(lines[0] + "\n{\"resourceSpans\": [oops\n" + lines[1] + "\n")
    with pytest.raises(ForensicsInputError, match=r"line 2: malformed JSON") as caught:
        open_traces([path])
    assert str(path) in str(caught.value) and "--skip-bad-lines" in str(caught.value)
    with open_traces([path], skip_bad_lines=True) as traces:
        assert traces.load_report.spans == 2
        assert traces.load_report.skipped_lines == 1
        assert any("lines 2" in w and str(path) in w for w in traces.load_report.warnings())
        assert traces.connection.execute("SELECT DISTINCT source_file FROM spans").fetchall() == [(str(path),)]


def test_truncated_last_line_is_skipped_with_a_counted_warning(tmp_path: Path) -> None:
    """A partial last line (writer killed) is dropped, the rest loads, and the warning counts the file."""
    lines = _small().lines(per_line=1)
    path = tmp_path / "t.jsonl"
    path.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    with open_traces([path]) as traces:
        assert traces.load_report.spans == 1
        assert traces.load_report.truncated == [path.resolve()]
        assert "truncated last line in 1 file(s)" in traces.load_report.warnings()[0]
        assert traces.connection.execute("SELECT source_file FROM spans").fetchall() == [(str(path.resolve()),)]


def test_last_line_without_newline_but_complete_is_kept(tmp_path: Path) -> None:
    """A complete last line that merely lacks its newline is not truncation."""
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(_small().lines(per_line=1)))
    with open_traces([path]) as traces:
        assert traces.load_report.spans == 2 and not traces.load_report.warnings()


@pytest.mark.parametrize("make, expected", [
    (lambda p: p / "missing.jsonl", "does not exist"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "holds no trace files"),
    (lambda p: str(p / "*.nothing"), "matches no file"),
])
def test_missing_path_empty_directory_and_empty_glob_are_clear_errors(tmp_path: Path, make, expected: str) -> None:  # type: ignore[no-untyped-def]
    """Missing paths, empty directories and globs that match nothing raise ForensicsInputError naming them."""
    target = make(tmp_path)
    with pytest.raises(ForensicsInputError, match=expected) as caught:
        open_traces([target])
    assert str(target) in str(caught.value)


def test_zstd_files_load_and_their_bad_lines_are_located(tmp_path: Path) -> None:
    """A .jsonl.zst file loads; a malformed line inside one is named by number (via the zstd CLI)."""
    import shutil
    import subprocess
    zstd = shutil.which("zstd")
    if zstd is None:
        if os.environ.get("CI") == "true":
            pytest.fail("zstd is required in CI (CI=true); .ci/run installs Debian's zstd package")
        pytest.skip("the zstd command is not installed")
    lines = _small().lines(per_line=1)
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(lines) + "\n")
    subprocess.run([zstd, "-q", str(good), "-o", str(tmp_path / "good.jsonl.zst")], check=True)
    with open_traces([tmp_path / "good.jsonl.zst"]) as traces:
        assert traces.load_report.spans == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\nnot json\n" + lines[1] + "\n")
    subprocess.run([zstd, "-q", str(bad), "-o", str(tmp_path / "bad.jsonl.zst")], check=True)
    with pytest.raises(ForensicsInputError, match=r"bad\.jsonl\.zst: line 2: malformed JSON"):
        open_traces([tmp_path / "bad.jsonl.zst"])
    with open_traces([tmp_path / "bad.jsonl.zst"], skip_bad_lines=True) as traces:
        assert traces.load_report.spans == 2 and traces.load_report.skipped_lines == 1


def test_several_damaged_files_are_each_repaired_and_reported(tmp_path: Path) -> None:
    """Two files with bad lines and one truncated file: all skipped lines reported per file, all good spans kept."""
    lines = _many_lines(6)  # distinct spans in every file, so none is a copy of another
    for number, name in enumerate(("a", "b")):
        (tmp_path / f"{name}.jsonl").write_text(lines[2 * number] + "\n{broken\n" + lines[2 * number + 1] + "\n")
    (tmp_path / "c.jsonl").write_text(lines[4] + "\n" + lines[5][:10])
    with open_traces([tmp_path], skip_bad_lines=True) as traces:
        assert traces.load_report.spans == 5
        assert sorted(d.path.name for d in traces.load_report.skipped) == ["a.jsonl", "b.jsonl"]
        assert [p.name for p in traces.load_report.truncated] == ["c.jsonl"]
        files = traces.connection.execute("SELECT source_file, count(*) FROM spans GROUP BY 1 ORDER BY 1").fetchall()
    assert [(Path(f).name, n) for f, n in files] == [("a.jsonl", 2), ("b.jsonl", 2), ("c.jsonl", 1)]


def test_truncated_last_line_and_malformed_middle_line_together_name_the_middle_line(tmp_path: Path) -> None:
    """A file both cut short and malformed in the middle: the error names the middle line; skipping reads the rest."""
    lines = _small().lines(per_line=1)
    path = tmp_path / "t.jsonl"
    path.write_text(lines[0] + "\n{oops\n" + lines[1] + "\n" + lines[1][:30])
    with pytest.raises(ForensicsInputError, match=r"line 2: malformed JSON") as caught:
        open_traces([path])
    assert str(path) in str(caught.value) and "--skip-bad-lines" in str(caught.value)
    assert "line 4" not in str(caught.value)  # the partial last line is not a bad line
    with open_traces([path], skip_bad_lines=True) as traces:
        assert traces.load_report.spans == 2
        assert traces.load_report.truncated == [path.resolve()]
        assert traces.load_report.skipped_lines == 1
        assert traces.connection.execute("SELECT DISTINCT source_file FROM spans").fetchall() == [(str(path.resolve()),)]


def _many_lines(count: int) -> list[str]:
    b = TraceBuilder()
    for i in range(count):
        b.add(f"r{i}", "read_state", c.KIND_READ, f"agent-{i}", i, attrs=attrs(STATE_KEY=f"k{i}", STATE_VERSION_READ=f"v{i}"))
    return b.lines(per_line=1)


def test_a_gzip_file_cut_short_keeps_its_complete_lines_with_a_truncation_warning(tmp_path: Path) -> None:
    """A .gz cut mid-stream (copied while written) loads its complete lines and warns, naming the file."""
    lines = _many_lines(400)
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with open_traces([path]) as traces:
        assert 0 < traces.load_report.spans < len(lines)
        assert traces.load_report.truncated == [path.resolve()]
        assert str(path.resolve()) in traces.load_report.warnings()[0]


def test_a_file_named_gz_that_is_not_gzip_is_refused_not_called_truncated(tmp_path: Path) -> None:
    """Plain text named .gz is an error naming the file, not a silently empty 'truncated' file."""
    path = tmp_path / "plain.jsonl.gz"
    path.write_text("\n".join(_small().lines()) + "\n")
    with pytest.raises(ForensicsInputError, match=r"line 1: not a valid gzip stream") as caught:
        open_traces([path])
    assert str(path.resolve()) in str(caught.value)


def test_a_zstd_file_cut_short_is_reported_not_silently_empty(tmp_path: Path) -> None:
    """A .zst cut mid-frame (DuckDB reads it without error) loads its complete lines and warns it was truncated."""
    import shutil
    import subprocess
    zstd = shutil.which("zstd")
    if zstd is None:
        if os.environ.get("CI") == "true":
            pytest.fail("zstd is required in CI (CI=true); .ci/run installs Debian's zstd package")
        pytest.skip("the zstd command is not installed")
    lines = _many_lines(4000)  # several zstd blocks, so the first half still decompresses
    plain = tmp_path / "all.jsonl"
    plain.write_text("\n".join(lines) + "\n")
    whole = tmp_path / "whole.jsonl.zst"
    subprocess.run([zstd, "-q", str(plain), "-o", str(whole)], check=True)
    with open_traces([whole]) as traces:  # an intact file: no warning
        assert traces.load_report.spans == len(lines) and not traces.load_report.warnings()
    data = whole.read_bytes()
    for name, keep in (("half.jsonl.zst", len(data) // 2), ("tiny.jsonl.zst", 40)):
        cut = tmp_path / name
        cut.write_bytes(data[:keep])
        with open_traces([cut]) as traces:
            assert traces.load_report.spans < len(lines)
            assert traces.load_report.truncated == [cut.resolve()], name
            assert "truncated" in traces.load_report.warnings()[0]
        if name == "half.jsonl.zst":
            with open_traces([cut]) as traces:
                assert traces.load_report.spans > 0


def test_parquet_inputs_that_are_not_ingest_parts_are_refused_naming_the_file(tmp_path: Path) -> None:
    """A damaged .parquet or a foreign one (other columns) is a ForensicsInputError naming it, not a DuckDB crash."""
    import duckdb
    damaged = tmp_path / "damaged" / "x.parquet"
    damaged.parent.mkdir()
    damaged.write_text("not parquet\n")
    foreign = tmp_path / "foreign" / "sales.parquet"
    foreign.parent.mkdir()
    duckdb.sql("SELECT 1 AS order_id, 'eu' AS region").write_parquet(str(foreign))
    for path in (damaged, foreign):
        with pytest.raises(ForensicsInputError, match="ingest") as caught:
            open_traces([path.parent])
        assert str(path.resolve()) in str(caught.value)
    with pytest.raises(ForensicsInputError, match="sales.parquet"):  # next to JSON lines, too
        open_traces([_small().write(tmp_path / "foreign" / "t.jsonl")] + [foreign])


def test_ingest_writes_a_large_file_in_bounded_row_groups_and_keeps_every_span(tmp_path: Path) -> None:
    """ingest cuts a part into row groups of at most PARQUET_ROW_GROUP spans (each thread buffers one
    under the memory limit), and the part holds every span exactly once."""
    import duckdb

    total = 2 * PARQUET_ROW_GROUP + 1000
    source = tmp_path / "big.jsonl"
    with open(source, "w", encoding="utf-8") as out:
        for first in range(0, total, 1000):
            spans = [otlp_span_json("%032x" % (n // 100 + 1), "%016x" % (n + 1), "", n, n + 10,
                                    attrs(GEN_AI_TOOL_NAME="t", TOOL_KIND=c.KIND_READ))
                     for n in range(first, min(first + 1000, total))]
            out.write(service_line("svc", spans) + "\n")
    result = ingest([source], tmp_path / "pq")
    assert result.spans == total
    part = str(next((tmp_path / "pq").glob("*.parquet")))
    groups = duckdb.sql("SELECT row_group_id, any_value(row_group_num_rows) FROM parquet_metadata($p) GROUP BY 1",
                        params={"p": part}).fetchall()
    assert len(groups) >= 3 and max(rows for _, rows in groups) <= PARQUET_ROW_GROUP
    with open_traces([tmp_path / "pq"]) as traces:
        assert traces.connection.execute("SELECT count(DISTINCT span_id), count(*) FROM spans").fetchall() == [
            (total, total)]

"""What `watch` survives: a line DuckDB refuses, clocks that lie, copy-truncate rotation, a pass
that fails after reading. Nothing is skipped silently; what is lost or ignored is counted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from prometheus_client import CollectorRegistry

import telemetry
from telemetry import conventions as c
from telemetry.forensics.watch import Watcher, WatchOptions
from telemetry.forensics.watch._follow import Follower
from telemetry.forensics.watch._state import STATE_FORMAT

HOUR_NS = 3600 * 10**9


def copy_traces(source: Path, target: Path, shift_ns: int = 0) -> Path:
    """The crew's trace files in ``target``, every time moved by ``shift_ns``."""
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.jsonl"):
        if not shift_ns:
            shutil.copy(path, target / path.name)
            continue
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for data in lines:
            for rs in data["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        for field in ("startTimeUnixNano", "endTimeUnixNano"):
                            span[field] = str(int(span[field]) + shift_ns)
                        for event in span.get("events", []):
                            event["timeUnixNano"] = str(int(event["timeUnixNano"]) + shift_ns)
        (target / path.name).write_text("".join(json.dumps(data) + "\n" for data in lines))
    return target


def watcher(paths: list[Path], **options: object) -> Watcher:
    opts = WatchOptions(paths=tuple(str(p) for p in paths), **{"settle": 0.0, **options})  # type: ignore[arg-type]
    return Watcher(opts, registry=CollectorRegistry())


def found(w: Watcher) -> float:
    return sum(s.value for m in w.registry.collect() for s in m.samples if s.name == c.METRIC_FORENSIC_FINDINGS_TOTAL)


def sample(w: Watcher, name: str, labels: dict[str, str] | None = None) -> float:
    return w.registry.get_sample_value(name, labels or {}) or 0.0


def one_span_line(end_ns: int, name: str = "tool") -> str:
    """A foreign writer's TracesData line holding one span that ends at ``end_ns``."""
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": name, "kind": 1,
            "startTimeUnixNano": str(end_ns - 1000), "endTimeUnixNano": str(end_ns)}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]})


# --- a line DuckDB refuses ---------------------------------------------------------------------

def test_a_line_duckdb_refuses_is_skipped_named_by_trace_file_and_counted(
        legacy_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A foreign line with a lone surrogate escape (valid to Python's json, refused by DuckDB)
    amid a crew's lines: the pass goes through, the line is named by its trace file and line
    (not the temporary file DuckDB read) and counted as bad, and every other line is judged."""
    folder = copy_traces(legacy_traces, tmp_path / "t")
    target = max(folder.glob("*.jsonl"), key=lambda p: p.stat().st_size)
    lines = target.read_text().splitlines(keepends=True)
    refused = one_span_line(10**18).replace('"name": "tool"', '"name": "\\ud800"')
    target.write_text("".join(lines[:3]) + refused + "\n" + "".join(lines[3:]))
    w = watcher([folder])
    try:
        result = w.run_pass()
        assert result.bad_lines == 1 and sample(w, c.METRIC_WATCH_BAD_LINES_TOTAL) == 1
        err = capsys.readouterr().err
        assert f"{target}: line 4: DuckDB refuses it: " in err and "chunk-" not in err
        assert {f.question for f in result.new} >= {"lost_updates", "constraint_loss_by_hop"}
        assert w.run_pass().lines == 0  # read once
    finally:
        w.close()


# --- clocks ------------------------------------------------------------------------------------

def test_a_huge_newest_ns_in_the_state_file_does_not_empty_the_window(
        legacy_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A state file whose newest span time is far in the future (a corrupt or hand-edited file)
    is not trusted: the crew's spans stay in the window and their findings are counted."""
    state = tmp_path / "watch.json"
    state.write_text(json.dumps({"format": STATE_FORMAT, "newest_ns": 2**62, "files": [], "seen": {}}))
    w = watcher([copy_traces(legacy_traces, tmp_path / "t")], state=state)
    try:
        result = w.run_pass()
        assert result.evicted == 0 and result.window_spans == result.spans > 0
        assert {f.question for f in result.new} >= {"lost_updates", "constraint_loss_by_hop"}
        assert "newest span time" in capsys.readouterr().err
    finally:
        w.close()


def test_a_future_dated_span_is_counted_not_trusted_and_the_lag_stays_honest(legacy_traces: Path, tmp_path: Path) -> None:
    """One span dated 2100 beside a crew's files: it is counted (future, then evicted as future),
    the crew's spans are judged and counted, and the lag is measured from the crew's newest span."""
    folder = copy_traces(legacy_traces, tmp_path / "t")
    (folder / "clock-ahead.jsonl").write_text(one_span_line(4_102_444_800 * 10**9) + "\n")  # 2100-01-01
    w = watcher([folder])
    try:
        result = w.run_pass()
        assert result.future == 1 and sample(w, c.METRIC_WATCH_FUTURE_SPANS_TOTAL) == 1
        assert sample(w, c.METRIC_WATCH_SPANS_EVICTED_TOTAL, {c.LABEL_REASON: c.EVICTED_FUTURE}) == 1
        assert sample(w, c.METRIC_WATCH_SPANS_EVICTED_TOTAL, {c.LABEL_REASON: c.EVICTED_WINDOW}) == 0
        assert {f.question for f in result.new} >= {"lost_updates", "constraint_loss_by_hop"}
        assert result.window_spans == result.spans - 1
        lag = sample(w, c.METRIC_WATCH_LAG_SECONDS)
        assert 0 < lag < 6 * 3600  # the crew ran in this test session
    finally:
        w.close()


def test_a_clock_stepped_back_by_more_than_the_window_keeps_judging_new_spans(
        legacy_traces: Path, guarded_traces: Path, tmp_path: Path) -> None:
    """Spans written before the host's clock stepped back two hours are dated two hours ahead of
    it; the spans written after must still be judged: the legacy crew's findings are counted, and
    what left the window because it is dated past the clock is counted as such."""
    before_step = copy_traces(guarded_traces, tmp_path / "before", shift_ns=2 * HOUR_NS)
    after_step = tmp_path / "after"
    after_step.mkdir()
    w = watcher([before_step, after_step])
    try:
        first = w.run_pass()
        assert first.spans > 0 and first.new == []
        copy_traces(legacy_traces, after_step)
        second = w.run_pass()
        assert {f.question for f in second.new} >= {"lost_updates", "constraint_loss_by_hop"}
        assert sample(w, c.METRIC_WATCH_SPANS_EVICTED_TOTAL, {c.LABEL_REASON: c.EVICTED_FUTURE}) == first.spans
        assert second.window_spans == second.spans
        assert 0 < sample(w, c.METRIC_WATCH_LAG_SECONDS) < 6 * 3600
    finally:
        w.close()


def test_the_window_follows_an_injected_wall_clock(legacy_traces: Path, tmp_path: Path) -> None:
    """With the wall clock injected a day before the crew ran, every crew span is dated past it:
    counted as future and, being more than a window ahead, evicted as such; nothing is judged."""
    folder = copy_traces(legacy_traces, tmp_path / "t")
    first_end = min(int(span["endTimeUnixNano"]) for path in folder.glob("*.jsonl")
                    for line in path.read_text().splitlines() for rs in json.loads(line)["resourceSpans"]
                    for ss in rs["scopeSpans"] for span in ss["spans"])
    day_before = first_end / 1e9 - 86400
    w = Watcher(WatchOptions(paths=(str(folder),), settle=0.0), registry=CollectorRegistry(),
                wall_clock=lambda: day_before)
    try:
        result = w.run_pass()
        assert result.future == result.spans > 0
        assert result.evicted == result.evicted_future == result.spans and result.new == []
    finally:
        w.close()


# --- copy-truncate rotation --------------------------------------------------------------------

def test_copy_truncate_rotation_is_noticed_after_the_writer_passed_the_old_offset(tmp_path: Path) -> None:
    """The exporter's own file (every one starts with the same bytes), rotated by copy and
    truncate, then written past the old offset before the follower looks again: every line
    written after the truncation is read, from the start."""
    folder = tmp_path / "traces"

    @telemetry.instrument_tool(kind="read")
    def ping(i: int) -> dict[str, bool]:
        return {"ok": True}

    follower = Follower([str(folder / "*.jsonl")])

    def read() -> int:
        follower.scan()
        lines = sum(chunk.lines for chunk in follower.read(1 << 24))
        follower.commit()
        return lines

    with telemetry.configure(service_name="rotated", traces_dir=folder, schedule_delay_millis=60_000) as rt:
        for i in range(40):
            ping(i)
            assert rt.force_flush()  # one line each
        assert read() == 40
        path = rt.trace_file
        assert path is not None
        shutil.copy(path, folder / (path.name + ".1"))  # logrotate's copytruncate
        os.truncate(path, 0)
        for i in range(80):
            ping(i)
            assert rt.force_flush()
        assert path.stat().st_size > follower.files[next(iter(follower.files))].offset
        assert read() == 80
    follower.close()


# --- a pass that fails after reading -----------------------------------------------------------

@pytest.fixture
def frozen_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder that cannot be written, root included (``chattr +i``), until the test thaws it."""
    folder = tmp_path / "state"
    folder.mkdir()
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=False, capture_output=True)


def test_a_pass_that_cannot_save_its_state_is_read_again_by_the_retry(
        legacy_traces: Path, tmp_path: Path, frozen_folder: Path) -> None:
    """The state folder becomes unwritable: the pass fails (and would be counted and retried);
    once it is writable again the retry reads the same lines and counts their findings once."""
    folder = copy_traces(legacy_traces, tmp_path / "t")
    total_lines = sum(len(p.read_text().splitlines()) for p in folder.glob("*.jsonl"))
    w = watcher([folder], state=frozen_folder / "watch.json")
    try:
        frozen = subprocess.run(["chattr", "+i", str(frozen_folder)], capture_output=True, text=True)
        if frozen.returncode != 0:
            pytest.skip(f"chattr +i is refused here ({frozen.stderr.strip()}); it needs root on ext4 or tmpfs")
        with pytest.raises((OSError, duckdb.Error)):
            w.run_pass()
        assert found(w) == 0 and sample(w, c.METRIC_WATCH_LINES_READ_TOTAL) == 0
        subprocess.run(["chattr", "-i", str(frozen_folder)], check=True)
        retry = w.run_pass()
        assert retry.lines == total_lines and sample(w, c.METRIC_WATCH_LINES_READ_TOTAL) == total_lines
        assert {f.question for f in retry.new} >= {"lost_updates", "constraint_loss_by_hop"}
        assert found(w) == len(retry.new)
        again = w.run_pass()
        assert again.lines == 0 and again.new == []
    finally:
        w.close()

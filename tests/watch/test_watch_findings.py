"""The watcher over real crew traces: what it counts, once; what it never counts; bad lines; the window."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from telemetry import conventions as c
from telemetry.forensics import QUESTION_NAMES, open_traces, question
from telemetry.forensics.watch import Watcher, WatchOptions, watched_questions
from telemetry.forensics.watch._findings import WATCHED, counted


def findings(registry: CollectorRegistry, name: str) -> float:
    return registry.get_sample_value(c.METRIC_FORENSIC_FINDINGS_TOTAL, {c.LABEL_QUESTION: name}) or 0.0


def copy_traces(source: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.jsonl"):
        shutil.copy(path, target / path.name)
    return target


def watcher(paths: list[Path], **options: object) -> Watcher:
    opts = WatchOptions(paths=tuple(str(p) for p in paths), **{"settle": 0.0, **options})  # type: ignore[arg-type]
    return Watcher(opts, registry=CollectorRegistry())


def test_every_watched_key_column_is_a_column_of_its_question(legacy_traces: Path) -> None:
    """A finding's identity names only columns its question returns; records are never watched."""
    with open_traces([legacy_traces]) as traces:
        for name, watched in WATCHED.items():
            assert set(watched.key) <= set(traces.columns(name)), name
            assert question(name).is_finding, name
    assert watched_questions() == [n for n in QUESTION_NAMES if n in WATCHED]


def test_the_legacy_crew_is_counted_once_however_many_passes(legacy_traces: Path, tmp_path: Path) -> None:
    """Lost updates and the dropped constraint are counted on the first pass; later passes add nothing."""
    w = watcher([copy_traces(legacy_traces, tmp_path / "t")])
    try:
        first = w.run_pass()
        assert {f.question for f in first.new} >= {"lost_updates", "constraint_loss_by_hop", c.QUESTION_RETRY_TAX}
        for name in watched_questions():
            assert findings(w.registry, name) == sum(1 for f in first.new if f.question == name)
        assert findings(w.registry, "lost_updates") >= 1 and findings(w.registry, "constraint_loss_by_hop") >= 1
        for _ in range(2):
            assert w.run_pass().new == []
        assert w.registry.get_sample_value(c.METRIC_WATCH_LINES_READ_TOTAL) == first.lines > 0
        for f in first.new:
            assert f.severity == question(f.question).severity
            assert f.row["verdict"] == c.VERDICT_HAPPENED
    finally:
        w.close()


def test_the_watcher_counts_what_forensics_finds_and_went_through(legacy_traces: Path, tmp_path: Path) -> None:
    """Same spans, same rows: the counts equal the forensics rows that went through, by question."""
    w = watcher([copy_traces(legacy_traces, tmp_path / "t")])
    try:
        w.run_pass()
        with open_traces([legacy_traces]) as traces:
            for name in watched_questions():
                assert findings(w.registry, name) == len(counted(name, traces.run(name))), name
    finally:
        w.close()


def test_only_happened_rows_are_counted(legacy_traces: Path) -> None:
    """The same row counts when its verdict is happened, and never when prevented or unknown (a
    chain gap, an order within the clock skew: the report lists those, the watcher does not page)."""
    with open_traces([legacy_traces]) as traces:
        rows = traces.run("lost_updates")
    assert rows and all(r["verdict"] == c.VERDICT_HAPPENED for r in rows)
    assert len(counted("lost_updates", rows)) == len(rows)
    for verdict in (c.VERDICT_PREVENTED, c.VERDICT_UNKNOWN):
        assert counted("lost_updates", [{**r, "verdict": verdict} for r in rows]) == {}


def test_the_guarded_crew_counts_nothing(guarded_traces: Path, tmp_path: Path) -> None:
    """Refused sends, deduplicated retries, rejected stale writes and told failures are not findings."""
    w = watcher([copy_traces(guarded_traces, tmp_path / "t")])
    try:
        result = w.run_pass()
        assert result.spans > 0 and result.new == []
        assert all(findings(w.registry, name) == 0 for name in watched_questions())
    finally:
        w.close()


def test_an_idle_pass_reuses_the_last_judgement_and_new_lines_are_judged_again(
        legacy_traces: Path, guarded_traces: Path, tmp_path: Path) -> None:
    """A pass that reads no line and evicts nothing reuses the last pass's evidence and rows (the
    window is unchanged); a file appearing after idle passes is judged and its findings counted."""
    folder = copy_traces(guarded_traces, tmp_path / "t")
    w = watcher([folder])
    try:
        assert w.run_pass().new == []
        judged = w.window.evidence
        idle = w.run_pass()
        assert idle.lines == 0 and idle.evicted == 0 and idle.new == []
        assert w.window.evidence is judged  # not computed again
        for path in legacy_traces.glob("*.jsonl"):
            shutil.copy(path, folder / f"later-{path.name}")
        later = w.run_pass()
        assert later.lines > 0 and w.window.evidence is not judged
        assert {f.question for f in later.new} >= {"lost_updates", "constraint_loss_by_hop"}
    finally:
        w.close()


def test_a_finding_counts_only_once_it_has_settled(legacy_traces: Path, tmp_path: Path) -> None:
    """With --settle, a finding first seen now is counted on the first pass at least that much later."""
    now = [1000.0]
    opts = WatchOptions(paths=(str(copy_traces(legacy_traces, tmp_path / "t")),), settle=10.0)
    w = Watcher(opts, registry=CollectorRegistry(), clock=lambda: now[0])
    try:
        assert w.run_pass().new == []
        now[0] += 9.0
        assert w.run_pass().new == []
        now[0] += 1.0
        assert {f.question for f in w.run_pass().new} >= {"lost_updates", "constraint_loss_by_hop"}
    finally:
        w.close()


def test_a_bad_line_is_skipped_named_and_counted(legacy_traces: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A line that is not OTLP is named by file and line on stderr and counted; its neighbours are read."""
    folder = copy_traces(legacy_traces, tmp_path / "t")
    target = next(folder.glob("*.jsonl"))
    good = target.read_bytes()
    target.write_bytes(b'{"resourceSpans": "not a list"}\n' + good)
    w = watcher([folder])
    try:
        result = w.run_pass()
        assert result.bad_lines == 1 and result.spans > 0
        assert w.registry.get_sample_value(c.METRIC_WATCH_BAD_LINES_TOTAL) == 1
        assert f"{target}: line 1:" in capsys.readouterr().err
    finally:
        w.close()


def test_a_hostile_folder_name_is_bound_not_spliced(legacy_traces: Path, tmp_path: Path) -> None:
    """Quotes, a semicolon and SQL in the folder name are data: the spans load and are counted."""
    folder = copy_traces(legacy_traces, tmp_path / "it's \"x\"; DROP TABLE spans_loaded; --")
    w = watcher([folder])
    try:
        assert w.run_pass().new
    finally:
        w.close()


def test_runs_leave_the_window_whole_and_their_keys_are_forgotten(legacy_traces: Path, tmp_path: Path) -> None:
    """With a tiny window every run but the newest leaves; the counted keys of those runs go with them."""
    w = watcher([copy_traces(legacy_traces, tmp_path / "t")], window=1e-6)
    try:
        first = w.run_pass()
        assert first.evicted > 0 and first.window_spans < first.spans
        runs = w.window.runs()
        assert all(run in runs for run in w.seen.values() if run is not None)
    finally:
        w.close()


def test_the_alert_rules_give_each_watched_question_its_on_call_severity() -> None:
    """The question lists of the ToolForensicFinding rules are exactly the watched questions,
    split by their severity in forensics.questions (records never page)."""
    import re

    import yaml

    from telemetry.runtime._resources import data_dir

    listed: dict[str, set[str]] = {}
    for path in sorted(data_dir("alerts").glob("*.rules.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == c.ALERT_FORENSIC_FINDING:
                    lists = {m for m in re.findall(r'question=~"([^"]+)"', rule["expr"])}
                    assert len(lists) == 1, rule["expr"]
                    listed.setdefault(rule["labels"][c.LABEL_SEVERITY], set()).update(lists.pop().split("|"))
    expected: dict[str, set[str]] = {}
    for name in watched_questions():
        expected.setdefault(question(name).severity, set()).add(name)
    assert listed == expected

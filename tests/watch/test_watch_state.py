"""Restarts: with --state nothing is read or counted twice; without it a restart recounts; bad state is named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from telemetry import conventions as c
from telemetry.exceptions import WatchStateError
from telemetry.forensics.watch import Watcher, WatchOptions
from telemetry.forensics.watch._cli import main
from telemetry.forensics.watch._state import load_state


def total(registry: CollectorRegistry) -> float:
    return sum(s.value for m in registry.collect() for s in m.samples
               if s.name == c.METRIC_FORENSIC_FINDINGS_TOTAL)


def one_pass(folder: Path, state: Path | None) -> tuple[float, float]:
    w = Watcher(WatchOptions(paths=(str(folder),), settle=0.0, state=state), registry=CollectorRegistry())
    try:
        w.run_pass()
        return total(w.registry), w.registry.get_sample_value(c.METRIC_WATCH_LINES_READ_TOTAL) or 0.0
    finally:
        w.close()


@pytest.fixture
def folder(legacy_traces: Path, tmp_path: Path) -> Path:
    target = tmp_path / "traces"
    target.mkdir()
    for path in legacy_traces.glob("*.jsonl"):
        shutil.copy(path, target / path.name)
    return target


def test_a_restart_with_state_neither_rereads_nor_recounts(folder: Path, tmp_path: Path) -> None:
    """Offsets and counted keys persist: the second process reads 0 lines and counts 0 findings,
    and lines appended meanwhile are read once."""
    state = tmp_path / "watch.json"
    counted, lines = one_pass(folder, state)
    assert counted > 0 and lines > 0
    saved = load_state(state)
    assert saved.seen and all(f.offset > 0 for f in saved.files)
    assert not state.with_name(state.name + ".tmp").exists()
    assert one_pass(folder, state) == (0.0, 0.0)


def test_without_state_a_restart_recounts(folder: Path) -> None:
    """In memory only: a new process reads everything again and counts its findings again."""
    first = one_pass(folder, None)
    assert first[0] > 0 and first[1] > 0  # else the equality below holds for a watcher that reads nothing
    assert one_pass(folder, None) == first


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": "other"}),
                                     json.dumps({"format": "outcome-telemetry-watch/1", "files": [{"path": 1}], "seen": {}})])
def test_a_corrupt_state_file_is_a_named_error(folder: Path, tmp_path: Path, content: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A state file that is not ours is refused by name (never replaced: that would recount), exit 2."""
    state = tmp_path / "watch.json"
    state.write_text(content)
    with pytest.raises(WatchStateError, match=str(state)):
        load_state(state)
    assert main([str(folder), "--state", str(state), "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert str(state) in err and "move it away to start afresh" in err
    if '"other"' in content:
        assert "is not an outcome-telemetry-watch/1 state file" in err
    assert state.read_text() == content

"""Every subcommand, found from the parsers (not a hand list), behaves as one program: ``--help``
exits 0, an unknown flag exits 2, a closed stdout (a pipe whose read end is closed, in a
subprocess) ends quietly with 0, and an output path that cannot be written exits 2 with one line
naming it and no traceback.

A command added to ``telemetry.cli.COMMANDS`` (or a verb added under one) is walked here without
a change to this file, except :data:`SAMPLES`: the arguments of one real run of it, which the test
requires for every command it finds, so none goes unwalked.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.cli import build_parser, command, main

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120

SAMPLES: dict[tuple[str, ...], list[str]] = {
    # {traces}: a quickstart's trace folder; {tmp}: a fresh folder; {port}: a free port
    ("forensics", "report"): ["{traces}", "-q"],
    ("forensics", "run"): ["silent_failures", "{traces}", "-q"],
    ("forensics", "list"): [],
    ("forensics", "ingest"): ["{traces}", "--to", "{tmp}/pq", "-q"],
    ("watch",): ["{traces}", "--metrics-port", "{port}", "--interval", "0.2", "--settle", "0", "-q"],
    ("audit",): ["--traces", "{traces}"],
    ("demo",): ["--scenario", "split_brain", "--mode", "legacy", "--no-alerts", "--out", "{tmp}/demo"],
    ("quickstart",): ["--out", "{tmp}/qs"],
    ("metrics-serve",): ["{tmp}", "--metrics-port", "{port}"],
    ("paths",): [],
}
SERVES = {("metrics-serve",), ("watch",)}
"""Commands that print lines and serve until signalled: a closed stdout must not stop them (the
scraper is their reader); they stop with 0 on SIGTERM."""


def _walk(path: tuple[str, ...], parser: argparse.ArgumentParser) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk((*path, name), sub)


def _nodes() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser under the top-level one: each command's, and each verb's under it."""
    top = build_parser()
    names = next(a for a in top._actions if a.dest == "command").choices
    assert names, "the top-level parser lists no commands"
    return [node for name in names for node in _walk((name,), command(name).build_parser())]


NODES = _nodes()
LEAVES = [path for path, parser in NODES
          if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)]
OUTPUTS = [(path, flag, action.type.__name__ == "output_folder")
           for path, parser in NODES for action in parser._actions
           if getattr(action.type, "__name__", "") in ("output_file", "output_folder")
           for flag in action.option_strings[-1:]]
"""Every output option (``--out``, ``--to``, ``--html``, ``--state``, ...): those whose argparse
type (the shared ``output_file``/``output_folder``) says it names something the command writes."""


def test_every_command_found_has_a_sample_run() -> None:
    """The walk found every command and verb, and each runnable one has arguments for a real run."""
    assert set(LEAVES) == set(SAMPLES), "add the new command's arguments to SAMPLES"
    assert {path[0] for path in LEAVES} >= {"forensics", "watch", "audit", "demo", "quickstart", "metrics-serve", "paths"}
    assert {flag for _path, flag, _ in OUTPUTS} >= {"--out", "--to", "--html", "--state"}


@pytest.mark.parametrize("path", [p for p, _ in NODES], ids=" ".join)
def test_help_exits_0(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: outcome-telemetry {' '.join(path)}"), out[:200]


def _leaf_under(path: tuple[str, ...]) -> tuple[str, ...]:
    return next(leaf for leaf in sorted(SAMPLES) if leaf[: len(path)] == path)


@pytest.mark.parametrize("path", [p for p, _ in NODES], ids=" ".join)
def test_an_unknown_flag_exits_2(path: tuple[str, ...], traces: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Unknown flags are refused everywhere (on a parent, before its verb), abbreviations of real
    ones included; given with otherwise complete arguments, so that the refusal is the flag's."""
    leaf = _leaf_under(path)
    rest = _argv(leaf, traces, tmp_path, _free_port())[len(path):]
    assert main([*path, "--no-such-flag", *rest]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --no-such-flag" in err and "Traceback" not in err, err
    if path == ("forensics", "report"):
        assert main([*path, str(traces), "--fail", "warning"]) == 2  # not taken as --fail-on
        assert "unrecognized arguments: --fail" in capsys.readouterr().err


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quickstart's trace folder (three calls, two silent failures), made by the command itself."""
    out = tmp_path_factory.mktemp("quickstart")
    done = subprocess.run([sys.executable, "-m", "telemetry.cli", "quickstart", "--out", str(out)],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return out / "traces"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _argv(path: tuple[str, ...], traces: Path, tmp: Path, port: int) -> list[str]:
    return [*path, *(a.format(traces=traces, tmp=tmp, port=port) for a in SAMPLES[path])]


def _closed_stdout(argv: list[str], *, ready: Callable[[], bool] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``outcome-telemetry ARGV`` with stdout a pipe whose read end is already closed; a command
    that serves gets SIGTERM once ``ready()``."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "telemetry.cli", *argv], stdout=write,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT)
    finally:
        os.close(write)
    if ready is not None:
        deadline = time.monotonic() + TIMEOUT
        while not ready():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    try:
        _out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"{argv} did not end within {TIMEOUT} s{' of SIGTERM' if ready else ''}: {err}") from None
    return subprocess.CompletedProcess(argv, proc.returncode, "", err)


def _scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return None


def _ready(path: tuple[str, ...], port: int) -> Callable[[], bool] | None:
    """When to stop a command that serves: ``watch`` once it has counted a finding (whose line went
    to the closed stdout), ``metrics-serve`` once it answers a scrape."""
    if path == ("watch",):
        counted = re.compile(rf"^{c.METRIC_FORENSIC_FINDINGS_TOTAL}\{{.*\}} [1-9]", re.MULTILINE)
        return lambda: bool(counted.search(_scrape(port) or ""))
    if path in SERVES:
        return lambda: _scrape(port) is not None
    return None


@pytest.mark.parametrize("path", [p for p, _ in NODES], ids=" ".join)
def test_help_on_a_closed_stdout_is_a_quiet_0(path: tuple[str, ...]) -> None:
    done = _closed_stdout([*path, "--help"])
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.parametrize("path", sorted(SAMPLES), ids=" ".join)
def test_a_run_on_a_closed_stdout_is_a_quiet_0(path: tuple[str, ...], traces: Path, tmp_path: Path) -> None:
    """A real run whose reader went away (``| head -0``): exit 0, no traceback (a command that serves
    keeps serving, its reader is the scraper, and stops with 0 on SIGTERM)."""
    port = _free_port()
    done = _closed_stdout(_argv(path, traces, tmp_path, port), ready=_ready(path, port))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr and "failed" not in done.stderr


def _unwritable(tmp_path: Path, folder: bool) -> list[Path]:
    """Paths no run can write: below a regular file (refused when parsed) and in /proc (which only
    the write itself refuses when the user is root)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    return [blocker / "below", Path("/proc/outcome-telemetry-test") / ("dir" if folder else "out.file")]


@pytest.mark.parametrize(("path", "flag", "folder"), OUTPUTS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v))
def test_an_unwritable_output_exits_2_naming_it(path: tuple[str, ...], flag: str, folder: bool, traces: Path,
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in _unwritable(tmp_path, folder):
        assert main([*_argv(path, traces, tmp_path, _free_port()), flag, str(bad)]) == 2, bad
        err = capsys.readouterr().err
        assert str(bad) in err and "Traceback" not in err, err
        assert err.splitlines()[-1].startswith(f"outcome-telemetry {' '.join(path)}: error: "), err

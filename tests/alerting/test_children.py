"""A Prometheus started for a test dies with the test process, even when that process is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import children

HERE = Path(__file__).parent


def _runs(pid: int, binary: str) -> bool:
    """Whether ``pid`` is alive and has become ``binary`` (past the exec)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except FileNotFoundError:
        return False
    return children.alive(pid) and Path(command).name == Path(binary).name


def test_prometheus_dies_when_the_process_that_started_it_is_killed(prometheus_binary: str, tmp_path: Path) -> None:
    """A stand-in for pytest starts Prometheus through children.spawn and is SIGKILLed; Prometheus follows."""
    (tmp_path / "prometheus.yml").write_text("global: {scrape_interval: 1s}\n")
    stand_in = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(HERE)!r})
        import children
        proc = children.spawn([
            {prometheus_binary!r}, "--config.file={tmp_path / 'prometheus.yml'}",
            "--storage.tsdb.path={tmp_path / 'data'}", "--web.listen-address=127.0.0.1:0", "--log.level=error",
        ])
        print(proc.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", stand_in], stdout=subprocess.PIPE, text=True)
    server = 0
    try:
        assert parent.stdout is not None
        server = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while not _runs(server, prometheus_binary):  # forked, but maybe not yet exec'd
            assert time.monotonic() < deadline, "prometheus never started"
            time.sleep(0.05)
        assert os.getpgid(server) == server, "the server runs in a process group of its own"
        parent.kill()  # what an OOM killer or a CI timeout does to pytest: no finally runs
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while children.alive(server):
            assert time.monotonic() < deadline, f"prometheus (pid {server}) outlived its parent by 10 s"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        if server and children.alive(server):
            os.kill(server, signal.SIGKILL)

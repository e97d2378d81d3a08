"""Start a server for a test so that it dies with the test process, however that process ends.

``finally: stop(proc)`` covers a test that fails or is interrupted; it cannot cover a pytest that
is killed outright (SIGKILL, an OOM kill, a CI timeout), and a Prometheus left behind keeps its
port and its disk. So each child also runs in its own process group (a terminal's Ctrl-C goes to
pytest, whose ``finally`` stops the child in order) and, on Linux, asks the kernel for SIGKILL
when its parent dies (``prctl(PR_SET_PDEATHSIG)``), checked against the race where the parent
is already gone by the time the child asks.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1


def _tie_to(parent: int) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child, between fork and exec
        os.setpgrp()
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
                os._exit(127)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)

    return preexec


def spawn(args: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **popen)`` for a child that must not outlive this process."""
    return subprocess.Popen(args, preexec_fn=_tie_to(os.getpid()), **popen)


def alive(pid: int) -> bool:
    """Whether ``pid`` is running (a zombie nobody has reaped yet counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

"""Run an ``--mcp-stdio`` server so that it ends when the audit ends, however the audit ends.

The ``mcp`` SDK starts a stdio server in a session of its own (a terminal's Ctrl-C must reach only
the client, which then stops the server). The audit stops it at a normal end and on SIGTERM or
SIGHUP; a SIGKILL (the OOM killer, ``kill -9``, a CI runner's timeout) leaves no code to run, and
the server, in its own session, would keep running. So the audit starts this script in the
server's place, with its own pid and the server's command line:

    python -I -S _reaper.py AUDIT_PID -- COMMAND ARGS...

It is the session's leader; it starts the server as its child (same stdin, stdout and stderr,
so the protocol passes straight between client and server), waits for it and exits with its
status. When the audit goes away (Linux tells it at once through ``PR_SET_PDEATHSIG``; on every
platform its parent pid changes, which it checks every :data:`POLL_SECONDS`) or it gets SIGTERM
or SIGHUP, it sends SIGTERM to its whole process group (the server and anything the server
started: ``npx`` and ``uv run`` wrappers start the real server as a grandchild), waits up to
:data:`GRACE_SECONDS`, then SIGKILL. A server that starts a session of its own escapes it.

Run by path, not as a module, so it imports the standard library only (no ``telemetry``, no
OpenTelemetry): it starts in the time the interpreter does.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

GRACE_SECONDS = 2.0
"""How long the server gets to end after SIGTERM before SIGKILL (the SDK's own grace)."""
POLL_SECONDS = 0.2
"""How often the parent pid is checked where the kernel cannot signal the parent's death."""
_PR_SET_PDEATHSIG = 1
_NOT_STARTED = 127
"""The exit status when the server's program cannot be started (a shell's for "not found")."""

_stopping: list[int] = []


def _on_signal(signum: int, _frame: object) -> None:
    _stopping.append(signum)


def _death_signal() -> None:
    """Ask Linux for SIGTERM when the parent dies (best effort: elsewhere the poll notices)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole group, the grace, then SIGKILL to whatever is left (this process too)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgrp()
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        pass
    try:
        child.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: _reaper.py PARENT_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    _death_signal()
    if os.getppid() != parent:  # the audit died before the death signal was asked for
        return 1
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return _NOT_STARTED
    while True:
        try:
            code = child.wait(timeout=POLL_SECONDS)
            return code if code >= 0 else 128 - code
        except subprocess.TimeoutExpired:
            pass
        if _stopping or os.getppid() != parent:
            _stop_group(child)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

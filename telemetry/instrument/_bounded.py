"""Run a read-back on a telemetry thread and wait for it only as long as the tool allows.

A read-back is the user's code reading the source of truth after a write: a database that
stopped answering, a lock, an endless retry loop in it would hold the tool's caller for as long
as it hangs, and telemetry must never change what a call does. Python cannot stop a running
function from outside, so the read-back runs on a worker thread, in a copy of the caller's
context (``current_call()``, the span as parent, the agent), and the caller waits up to the
tool's ``readback_timeout``. A read-back that answers late is left to finish on its thread; its
answer is dropped.

Workers are daemon threads kept idle between calls (a thread per call would cost a thread
start per write); a worker held by a read-back that timed out goes back to the idle ones when
that read-back ends. At most :data:`MAX_THREADS` exist: when every one is held by a read-back
that never returned, further read-backs are not run (``no_thread``) rather than leaking a thread
per call. A fork gets no workers of the parent's (threads do not survive it).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["MAX_THREADS", "run_bounded"]

MAX_THREADS = 32
"""Read-back threads at most; more are held only by read-backs that never returned."""

Ended = Literal["returned", "raised", "timeout", "no_thread"]


class _Job:
    __slots__ = ("args", "context", "done", "error", "fn", "value")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args
        self.context = contextvars.copy_context()
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.context.run(self.fn, *self.args)
        except BaseException as exc:  # handed to the caller, which decides what it means
            self.error = exc
        finally:
            self.done.set()


class _Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.count = 0

    def take(self) -> _Worker | None:
        with self.lock:
            if self.idle:
                return self.idle.pop()
            if self.count >= MAX_THREADS:
                return None
            self.count += 1
        return _Worker(self)

    def give_back(self, worker: _Worker) -> None:
        with self.lock:
            self.idle.append(worker)


class _Worker:
    """A daemon thread running one job at a time, handed over through a one-slot lock pair."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.job: _Job | None = None
        self.ready = threading.Semaphore(0)
        threading.Thread(target=self._loop, name="outcome-telemetry-readback", daemon=True).start()

    def submit(self, job: _Job) -> None:
        self.job = job
        self.ready.release()

    def _loop(self) -> None:
        while True:
            self.ready.acquire()
            job, self.job = self.job, None
            if job is not None:
                job.run()
            self.pool.give_back(self)


_pool = _Pool()


def _forget_after_fork() -> None:
    global _pool
    _pool = _Pool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def run_bounded(fn: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> tuple[Ended, Any]:
    """``fn(*args)`` on a read-back thread, waited for up to ``timeout`` seconds.

    Returns ``("returned", value)``, ``("raised", exception)`` (a BaseException included: the
    caller re-raises what must reach the tool's caller), ``("timeout", None)`` or
    ``("no_thread", None)``. A Ctrl-C while waiting propagates to the caller.
    """
    worker = _pool.take()
    if worker is None:
        return "no_thread", None
    job = _Job(fn, args)
    worker.submit(job)
    if not job.done.wait(timeout):
        return "timeout", None
    if job.error is not None:
        return "raised", job.error
    return "returned", job.value

"""Real worker processes for the multi-process tests, started from a preloaded fork server.

The guard and coordination tests need separate processes racing on one database. Starting each
one with ``spawn`` costs a fresh interpreter that imports the package again (about a quarter of a
CPU second each, dozens per run). ``forkserver`` starts one clean, single-threaded server per test
process, which imports the worker modules once; every worker is then forked from it. Each worker
is still its own process with its own connections, opened after the fork, and the server holds
no connection, thread or lock that a fork could copy.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext
from types import ModuleType

_PRELOAD: set[str] = set()


def context(*workers: ModuleType) -> BaseContext:
    """The ``forkserver`` context, with ``workers`` imported by its server.

    The server starts at the first ``Process.start()`` of this test process and keeps the preload
    it was started with; a worker module named only later is imported by each worker instead
    (slower, same behaviour).
    """
    _PRELOAD.update(module.__name__ for module in workers)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(sorted(_PRELOAD))
    return ctx

"""The runtime's one at-fork hook: a forked child renews every live object in the order they were
made, a failing one does not leave the rest with the parent's state, and renewal keeps nothing alive."""

from __future__ import annotations

import gc
import os
import weakref

import pytest

from telemetry.runtime._fork import renew_after_fork


class _Recorder:
    def __init__(self, name: str, log: list[str], fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails
        renew_after_fork(self)

    def _after_fork(self) -> None:
        self.log.append(self.name)
        if self.fails:
            raise RuntimeError("a renewal that fails")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_renews_each_live_object_in_order() -> None:
    log: list[str] = []
    kept = [_Recorder("first", log), _Recorder("failing", log, fails=True), _Recorder("last", log)]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, ",".join(log).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        renewed = pipe.read().decode()
    os.waitpid(pid, 0)
    assert renewed == "first,failing,last" and log == []  # the parent renews nothing
    assert len(kept) == 3


def test_renewal_keeps_no_object_alive() -> None:
    gone = weakref.ref(_Recorder("dropped", []))
    gc.collect()
    assert gone() is None

"""Version tokens for the state guard: unguessable, unique, and cheap to make.

A token is 96 random bits from the OS's CSPRNG (``os.urandom``), as hex behind ``ver_``, so a
model cannot guess the next one by arithmetic. Every accepted write makes one, and a system call
per write measured as a visible share of a guarded write on SQLite, so each thread reads a batch
of random bytes at once and hands out each byte once. A forked child must never hand out the
bytes its parent's batch still holds (both would write the same "new" version), so a fork drops
every batch: the child reads its own.
"""

from __future__ import annotations

import os
import threading
from typing import Final

__all__ = ["new_version"]

_TOKEN_BYTES: Final = 12
_RANDOM_BATCH: Final = _TOKEN_BYTES * 340
"""Random bytes read from the OS at once: one system call per 340 tokens instead of one each."""
_TOKEN_HEX: Final = 2 * _TOKEN_BYTES
_HEX_BATCH: Final = 2 * _RANDOM_BATCH
_random = threading.local()  # this thread's batch (as hex) and where its next unused digits start


def _forget_after_fork() -> None:
    global _random
    _random = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def new_version() -> str:
    """A fresh opaque version token: ``ver_`` and 24 hex digits (96 random bits)."""
    local = _random
    at = getattr(local, "at", _HEX_BATCH)
    if at >= _HEX_BATCH:
        local.batch, at = os.urandom(_RANDOM_BATCH).hex(), 0
    local.at = at + _TOKEN_HEX
    batch: str = local.batch
    return "ver_" + batch[at:at + _TOKEN_HEX]

"""One at-fork hook for the runtime's objects that must renew their state in a forked child.

A forked child inherits locks that a thread of the parent may have held (that thread is not in the
child, so the lock would never be released), queues of the parent's spans and the parent's file
descriptors. Each object that keeps such state has an ``_after_fork`` method and is listed here;
one hook calls them in a child, in the order the objects were made. The list holds them weakly, so
renewal never keeps an object alive, and ``os.register_at_fork`` (which has no way to remove a
hook) is called once per process instead of once per object.
"""

from __future__ import annotations

import itertools
import os
import weakref
from typing import Protocol

__all__ = ["Renewable", "renew_after_fork"]


class Renewable(Protocol):
    def _after_fork(self) -> None: ...


_RENEWED: weakref.WeakValueDictionary[int, Renewable] = weakref.WeakValueDictionary()
_ORDER = itertools.count()


def renew_after_fork(obj: Renewable) -> None:
    """Call ``obj._after_fork()`` in every child forked while ``obj`` is alive."""
    _RENEWED[next(_ORDER)] = obj


def _renew() -> None:
    for obj in list(_RENEWED.values()):
        try:
            obj._after_fork()
        except Exception:  # one object's failure must not leave the others with the parent's state
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew)

"""Recorded results judged once per text: the verdicts of short texts remembered, by text.

A live reader of traces (``observe_tool_spans``) judges the result every tool span recorded, and
tools return the same few texts again and again (``{"ok": true}``, the one failure envelope a
quota gives). Parsing and judging such a text costs far more than looking it up, so
:class:`RecordedVerdicts` remembers the verdict of each short text it judged and answers a repeat
with it: the same :class:`~telemetry.envelopes.Recorded` :func:`~telemetry.envelopes.read_recorded`
gives, since the text is all a verdict depends on, apart from the shapes registered.

Those it follows through :data:`._shapes.generation`: a registration or a removal empties the
memory, and a verdict judged while one happened is not kept. A verdict during which a registered
shape raised is not kept either, so each later call meets (and reports) the failure as it would
without the memory. A registered shape is expected to answer from the result alone; one whose
answer changes with time or outside state would be remembered at its first answer.

Bounded in both directions: texts longer than :data:`REMEMBERED_CHARS` are judged every time and
never kept, and at most :data:`REMEMBERED` verdicts are (the oldest goes first), so the memory
stays under a few megabytes whatever the spans hold. Safe from several threads without a lock:
each step is one dict operation, and a race costs at worst a verdict judged twice.
"""

from __future__ import annotations

from . import _shapes
from ._classify import Report
from ._recorded import Recorded, read_recorded

__all__ = ["REMEMBERED", "REMEMBERED_CHARS", "RecordedVerdicts"]

REMEMBERED = 1024
"""How many verdicts one :class:`RecordedVerdicts` keeps (the oldest is forgotten first)."""
REMEMBERED_CHARS = 1024
"""The longest text whose verdict is kept; a longer one is judged every time."""


class RecordedVerdicts:
    """:func:`~telemetry.envelopes.read_recorded`, remembering the verdicts of short texts.

    ``verdicts.read(text, report)`` answers exactly what ``read_recorded(text, report)`` answers
    (see the module docstring for when a verdict is judged anew). One instance per reader: it
    holds the memory.
    """

    __slots__ = ("_memory",)

    def __init__(self) -> None:
        self._memory: tuple[int, dict[str, Recorded]] = (_shapes.generation, {})

    def read(self, text: str | None, report: Report | None = None) -> Recorded:
        """The verdict on ``text``: remembered when this text was judged since the shapes last changed."""
        if type(text) is not str or len(text) > REMEMBERED_CHARS:  # None, a long text, a str subclass
            return read_recorded(text, report)
        generation = _shapes.generation
        memory = self._memory
        if memory[0] != generation:
            memory = self._memory = (generation, {})
        known = memory[1]
        found = known.get(text)
        if found is not None:
            return found
        if _shapes.registered:
            raised: list[BaseException] = []

            def noted(exc: BaseException) -> None:
                raised.append(exc)
                if report is not None:
                    report(exc)

            recorded = read_recorded(text, noted)
            if raised:
                return recorded
        else:
            recorded = read_recorded(text, report)
        if _shapes.generation == generation:
            if len(known) >= REMEMBERED:
                try:
                    del known[next(iter(known))]
                except (KeyError, RuntimeError, StopIteration):  # another thread got there first
                    pass
            known[text] = recorded
        return recorded

    def forget(self) -> None:
        """Drop every remembered verdict."""
        self._memory = (_shapes.generation, {})

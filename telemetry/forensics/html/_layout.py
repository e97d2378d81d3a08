"""Measuring and placing the SVG pictures' labels so that no two ever overlap.

There is no script on the page, so nothing measures text in the browser: every label's width is
estimated here, conservatively, and the pictures are laid out from those estimates. Labels use
the monospace font (an advance of about 0.6 em per character in the fonts browsers map it to);
characters outside Latin count as wide (CJK, emoji and fallback fonts run to 1.2 em). A label
longer than the room it has is cut with an ellipsis and keeps its full value in a ``<title>``
(shown on hover). A picture is one ``viewBox`` scaled uniformly to the page's width, so labels
apart in its coordinates stay apart at every width; the Chromium test reads the drawn boxes to
hold the estimate to the truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._markup import esc, plain

__all__ = ["Label", "clip", "first_overlap", "fitted", "overlaps", "shown", "stagger", "text_width"]

CHAR_EM = 0.62
"""Advance of one narrow character, in em (DejaVu Sans Mono and Liberation Mono are 0.60)."""
WIDE = 2.1
"""A character outside Latin counts as this many narrow ones."""
LINE = 1.5
"""Baseline to baseline, in em: more than a label's box (:attr:`Label.box`) is high."""
ELLIPSIS = "…"


def shown(value: Any) -> str:
    """``value`` as one line of label text: whitespace runs as one space, control characters,
    bidirectional overrides and lone surrogates written out (``\\x1b``) instead of acting."""
    return " ".join(plain(value).split())


def cells(text: str) -> float:
    """How many narrow characters ``text`` is as wide as (see :data:`WIDE`)."""
    return sum(1.0 if ord(ch) < 0x300 else WIDE for ch in text)


def text_width(text: str, size: float) -> float:
    """The estimated drawn width of ``text`` at font size ``size`` (an upper bound)."""
    return cells(text) * size * CHAR_EM


def clip(text: str, width: float, size: float) -> str:
    """``text`` cut (with an ellipsis) so that it fits ``width`` at ``size``; whole when it fits."""
    if text_width(text, size) <= width:
        return text
    room = width / (size * CHAR_EM) - WIDE  # the ellipsis is outside Latin
    used, kept = 0.0, []
    for ch in text:
        used += 1.0 if ord(ch) < 0x300 else WIDE
        if used > room:
            break
        kept.append(ch)
    return "".join(kept) + ELLIPSIS if room > 0 else ""


@dataclass(frozen=True)
class Label:
    """One line of text at ``(x, y)`` (``y`` is the baseline), drawn from its start.

    ``text`` is what is drawn (already cut to fit), ``full`` the whole value for the hover title.
    """

    x: float
    y: float
    text: str
    full: str
    size: float
    cls: str = ""

    @property
    def box(self) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) in the picture's coordinates, as estimated."""
        top = self.y - 1.15 * self.size  # ascent, with room for a fallback font's (1.16 em at most)
        return (self.x, top, self.x + text_width(self.text, self.size), self.y + 0.3 * self.size)

    def svg(self) -> str:
        """The ``<text>`` element, every value escaped; a ``<title>`` when the text was cut."""
        cls = f' class="{esc(self.cls)}"' if self.cls else ""
        title = f"<title>{esc(self.full)}</title>" if self.full != self.text else ""
        return (f'<text x="{self.x:.1f}" y="{self.y:.1f}" font-size="{self.size:g}"{cls}>'
                f"{title}{esc(self.text)}</text>")


def fitted(x: float, y: float, value: Any, width: float, size: float, cls: str = "") -> Label:
    """A label of ``value`` at ``(x, y)`` cut to ``width``."""
    full = shown(value)
    return Label(x, y, clip(full, width, size), full, size, cls)


def overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether two (left, top, right, bottom) boxes share any area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def first_overlap(labels: Sequence[Label]) -> tuple[Label, Label] | None:
    """Two labels whose boxes overlap, or None (what the layouts promise, checked in tests)."""
    drawn = [label for label in labels if label.text]
    for i, a in enumerate(drawn):
        for b in drawn[i + 1:]:
            if overlaps(a.box, b.box):
                return a, b
    return None


def stagger(starts: Sequence[float], widths: Sequence[float], gap: float) -> list[int]:
    """A line for each interval ``[start, start + width]`` (given left to right) so that no two on
    one line come closer than ``gap``: the first line with room, else a new one."""
    ends: list[float] = []
    out = []
    for start, width in zip(starts, widths):
        for line, end in enumerate(ends):
            if start >= end + gap:
                ends[line] = start + width
                out.append(line)
                break
        else:
            ends.append(start + width)
            out.append(len(ends) - 1)
    return out

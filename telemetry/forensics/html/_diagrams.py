"""Inline SVG pictures: a delegation chain by hop, a state key's reads and writes, a tool's calls.

Each picture is laid out first (every label placed and cut to the room it has: :mod:`._layout`)
and drawn second, so a test can hold the layout to its promise without a browser. Both the chain
and the timeline run top to bottom, one hop or one event a row, so they stay about as narrow as
a phone and grow only downwards; a picture wider than the page scales down whole. Colour is
never the only signal: a lost constraint, a lost update, a divergent or refused write is also
written out in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import conventions as c
from ._data import Chain
from ._layout import LINE, Label, clip, fitted, shown, stagger, text_width
from ._markup import esc, text_of

__all__ = ["Picture", "bars_picture", "chain_picture", "loss_sentence", "timeline_picture"]

FONT, SMALL = 11.0, 10.0
_ACCEPTED = frozenset({c.OUTCOME_OK, c.OUTCOME_FORCED})


@dataclass
class Picture:
    """A laid-out picture: its size, its labels (for the overlap checks) and its other shapes."""

    cls: str
    title: str
    width: float = 0.0
    height: float = 0.0
    labels: list[Label] = field(default_factory=list)
    shapes: list[str] = field(default_factory=list)

    def svg(self) -> str:
        w, h = f"{self.width:.0f}", f"{self.height:.0f}"
        return (f'<svg class="pic {self.cls}" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}">'
                f"<title>{esc(self.title)}</title>{''.join(self.shapes)}"
                f"{''.join(label.svg() for label in self.labels)}</svg>")


def _ids(value: Any) -> list[str]:
    return [text_of(v) for v in value] if isinstance(value, (list, tuple)) else []


def loss_sentence(loss: Mapping[str, Any]) -> str:
    """``C3 last carried at hop 2, lost at hop 3 by agent writer (task T1.1.1.1)``, or for a
    gap row, which parent hop is missing."""
    if loss.get("constraint_id") is None:
        return (f"task {text_of(loss.get('dropped_task_id'))} at hop {text_of(loss.get('dropped_at_hop'))} names "
                f"parent {text_of(loss.get('parent_task_id'))}, which is not in the evidence: what that hop "
                "carried cannot be told")
    return (f"{text_of(loss.get('constraint_id'))} last carried at hop {text_of(loss.get('last_hop_carried'))}, "
            f"lost at hop {text_of(loss.get('dropped_at_hop'))} by agent {text_of(loss.get('dropped_by_agent'))} "
            f"(task {text_of(loss.get('dropped_task_id'))})")


# -- the delegation chain ------------------------------------------------------------------------

_BOX_W, _PAD, _GUTTER, _COL_GAP, _ROW_GAP = 300.0, 8.0, 68.0, 20.0, 26.0


def _task_lines(task: Mapping[str, Any], lost: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The lines of one task's box, each with its class."""
    carried, waived, reasons = _ids(task.get("carried")), _ids(task.get("waived")), _ids(task.get("reasons"))
    lines = [(text_of(task.get("task")), "name"), (f"by {text_of(task.get('agent_id')) or '(no agent)'}", ""),
             ("carried: " + (", ".join(carried) or "none"), "carried")]
    if waived:
        lines.append(("waived: " + "; ".join(f"{w} ({r})" if r else w for w, r in
                                             zip(waived, reasons + [""] * len(waived))), "waived"))
    dropped = [text_of(r.get("constraint_id")) for r in lost if r.get("constraint_id") is not None]
    if dropped:
        lines.append((f"LOST: {', '.join(dropped)}", "lostlabel"))
    for gap in (r for r in lost if r.get("constraint_id") is None):
        lines.append((f"PARENT MISSING: {text_of(gap.get('parent_task_id'))}", "lostlabel"))
    return lines


def chain_picture(chain: Chain, losses: Sequence[Mapping[str, Any]]) -> Picture:
    """One chain, a hop a row: each task a box (its id, agent, carried, waived with reasons and
    lost constraints), a line from each task to the one it was delegated from; hops not drawn
    and tasks beyond :data:`._data.MAX_PER_HOP` said in words. ``losses``: this chain's
    ``constraint_loss_by_hop`` rows (the same run and root)."""
    pic = Picture("chain", f"delegation chain {shown(chain.root)} in run {shown(chain.run_id)}")
    lost_at: dict[str, list[Mapping[str, Any]]] = {}
    for loss in losses:
        lost_at.setdefault(text_of(loss.get("dropped_task_id")), []).append(loss)
    by_hop: dict[int, list[dict[str, Any]]] = {}
    for task in chain.tasks:
        by_hop.setdefault(int(task["hop"]), []).append(task)
    gap_after = {lo - 1: (lo, hi, n) for lo, hi, n in chain.gaps}
    column: dict[str, int] = {}
    where: dict[str, tuple[float, float, float]] = {}  # task: (centre x, top, bottom)
    widest, y = 1, 8.0
    inner = _BOX_W - 2 * _PAD
    for hop in sorted(by_hop):
        tasks = sorted(by_hop[hop], key=lambda t: (column.get(text_of(t.get("parent")), 1 << 30), text_of(t["task"])))
        widest = max(widest, len(tasks))
        lines = [_task_lines(t, lost_at.get(text_of(t["task"]), [])) for t in tasks]
        row_h = 2 * _PAD + max(len(ls) for ls in lines) * LINE * FONT
        pic.labels.append(fitted(8, y + _PAD + FONT, f"hop {hop:,}", _GUTTER - 16, SMALL, "hop"))
        more = chain.per_hop.get(hop, len(tasks)) - len(tasks)
        if more > 0:
            pic.labels.append(fitted(8, y + _PAD + FONT + LINE * SMALL, f"+{more:,} more", _GUTTER - 16, SMALL, "small"))
        for i, (task, task_lines) in enumerate(zip(tasks, lines)):
            name, x = text_of(task["task"]), _GUTTER + i * (_BOX_W + _COL_GAP)
            column[name] = i
            where[name] = (x + _BOX_W / 2, y, y + row_h)
            cls = "task lost" if lost_at.get(name) else "task"
            pic.shapes.append(f'<rect class="{cls}" x="{x:.0f}" y="{y:.1f}" width="{_BOX_W:.0f}" height="{row_h:.1f}" '
                              f'rx="6"><title>{esc(" · ".join(shown(t) for t, _ in task_lines))}</title></rect>')
            for n, (text, line_cls) in enumerate(task_lines):
                pic.labels.append(fitted(x + _PAD, y + _PAD + FONT + n * LINE * FONT, text, inner, FONT, line_cls))
        y += row_h + _ROW_GAP
        if hop in gap_after:
            lo, hi, n = gap_after[hop]
            hops = f"hop {lo:,}" if lo == hi else f"hops {lo:,} to {hi:,}"
            pic.labels.append(fitted(_GUTTER, y + SMALL, f"⋮ {hops} not drawn: {n:,} task(s)", _BOX_W, SMALL, "small"))
            y += LINE * SMALL + _ROW_GAP
    for task in chain.tasks:
        cx, top, _ = where[text_of(task["task"])]
        parent = where.get(text_of(task.get("parent")))
        if parent is not None and parent[2] < top:
            pic.shapes.append(f'<line class="edge" x1="{parent[0]:.0f}" y1="{parent[2]:.1f}" x2="{cx:.0f}" y2="{top:.1f}"/>')
        elif task.get("parent") is not None:
            pic.shapes.append(f'<line class="edge cut" x1="{cx:.0f}" y1="{top - 12:.1f}" x2="{cx:.0f}" y2="{top:.1f}"/>')
    pic.width = _GUTTER + widest * (_BOX_W + _COL_GAP) - _COL_GAP + 8
    pic.height = y - _ROW_GAP + 8
    return pic


# -- a state key's reads and writes --------------------------------------------------------------

_LANE_W, _MAX_LANES, _TEXT_W, _NAME_W = 40.0, 8, 280.0, 150.0


def _event_lines(e: Mapping[str, Any], lost: bool, divergent: bool) -> list[tuple[str, float, str]]:
    """One event's lines (text, size, class): who did what, the versions, and the mark."""
    agent = text_of(e.get("agent_id")) or "(no agent)"
    outcome = text_of(e.get("outcome"))
    half = (_TEXT_W - text_width(" → ", SMALL)) / 2
    if e.get("tool_kind") == c.KIND_READ:
        head, versions = f"{e.get('n')}. {agent} read", f"version {shown(e.get('version_read')) or '?'}"
        accepted = True
    else:
        accepted = outcome in _ACCEPTED or not outcome
        head = f"{e.get('n')}. {agent} " + ("wrote" if accepted else "write refused" if outcome in c.REFUSAL_OUTCOMES
                                             else "write failed")
        expected, written = shown(e.get("version_expected")), shown(e.get("version_written")) or "nothing"
        versions = (f"{clip(expected, half, SMALL)} → {clip(written, half, SMALL)}" if expected
                    else f"→ {written} (no expected version)")
    lines = [(head, FONT, "event"), (versions, SMALL, "small")]
    if lost:
        lines.append(("LOST UPDATE: overwrote a newer version", SMALL, "lostlabel"))
    elif divergent:
        lines.append(("DIVERGENT: another agent read it otherwise", SMALL, "divlabel"))
    if outcome and outcome != c.OUTCOME_OK:
        lines.append((f"{'refused' if outcome in c.REFUSAL_OUTCOMES else 'outcome'}: {outcome}", SMALL,
                      "small" if accepted else "refusal"))
    return lines


def timeline_picture(events: Sequence[Mapping[str, Any]], total: int, lost_spans: set[str],
                     divergent_spans: set[str]) -> Picture:
    """A state key's reads and writes in time order, one a row, one lane per agent: reads as
    circles, writes as squares, the versions and marks beside them. ``events`` carry their place
    ``n`` among ``total``; the events not drawn between them are said in words."""
    pic = Picture("timeline", "reads and writes by agent, in time order")
    agents = list(dict.fromkeys(text_of(e.get("agent_id")) or "(no agent)" for e in events))
    if len(agents) > _MAX_LANES:
        agents = agents[:_MAX_LANES - 1] + ["(other agents)"]

    def lane_of(e: Mapping[str, Any]) -> int:
        name = text_of(e.get("agent_id")) or "(no agent)"
        return agents.index(name) if name in agents else len(agents) - 1

    lane_x = [8 + _LANE_W * i + _LANE_W / 2 for i in range(len(agents))]
    text_x = 8 + _LANE_W * len(agents) + 12
    names = [fitted(0, 0, a, _NAME_W, SMALL, "agent") for a in agents]
    lines = stagger([x - 4 for x in lane_x], [text_width(n.text, SMALL) for n in names], 10)
    for x, name, line in zip(lane_x, names, lines):
        base = 8 + SMALL + line * LINE * SMALL
        pic.labels.append(Label(x - 4, base, name.text, name.full, SMALL, "agent"))
        pic.shapes.append(f'<line class="lane" x1="{x:.0f}" y1="{base + 4:.1f}" x2="{x:.0f}" '
                          f'y2="{8 + (max(lines, default=0) + 1) * LINE * SMALL + 6:.1f}"/>')
    top = y = 8 + (max(lines, default=0) + 1) * LINE * SMALL + 6
    previous = 0

    def elision(count: int, at: float) -> float:
        pic.labels.append(fitted(text_x, at + SMALL, f"⋮ {count:,} read(s) and write(s) not drawn", _TEXT_W, SMALL, "small"))
        return at + LINE * SMALL + 6

    for e in events:
        n = int(e.get("n") or previous + 1)
        if n > previous + 1:
            y = elision(n - previous - 1, y)
        previous = n
        span = text_of(e.get("span_id"))
        rows = _event_lines(e, span in lost_spans, span in divergent_spans)
        x, mid = lane_x[lane_of(e)], y + FONT * 0.62
        pic.shapes.append(f'<line class="guide" x1="{x + 8:.0f}" y1="{mid:.1f}" x2="{text_x - 4:.0f}" y2="{mid:.1f}"/>')
        tip = esc(" · ".join(shown(t) for t, _, _ in rows) + f" · {shown(e.get('tool_name'))} at {shown(e.get('start_time'))}")
        if e.get("tool_kind") == c.KIND_READ:
            pic.shapes.append(f'<circle class="read" cx="{x:.0f}" cy="{mid:.1f}" r="6"><title>{tip}</title></circle>')
        else:
            outcome = text_of(e.get("outcome"))
            cls = "write" if outcome in _ACCEPTED or not outcome else "write refused"
            cls += " lostupdate" if span in lost_spans else " divergent" if span in divergent_spans else ""
            pic.shapes.append(f'<rect class="{cls}" x="{x - 6:.0f}" y="{mid - 6:.1f}" width="12" height="12">'
                              f"<title>{tip}</title></rect>")
        for i, (text, size, cls) in enumerate(rows):
            pic.labels.append(fitted(text_x, y + FONT + i * LINE * FONT, text, _TEXT_W, size, cls))
        y += len(rows) * LINE * FONT + 6
    if total > previous:
        y = elision(total - previous, y)
    pic.shapes[:0] = [f'<line class="lane" x1="{x:.0f}" y1="{top:.1f}" x2="{x:.0f}" y2="{y:.1f}"/>' for x in lane_x]
    pic.width, pic.height = text_x + _TEXT_W + 8, y + 4
    return pic


# -- a tool's calls --------------------------------------------------------------------------------

def bars_picture(parts_by_name: Mapping[str, Mapping[str, int]]) -> Picture:
    """Three stacked bars (transport, read-back, outcome), each value's share with its count,
    written inside its segment when it fits there and always in the segment's title."""
    good = {c.TRANSPORT_OK, c.OUTCOME_OK, c.READBACK_MATCH, c.READBACK_NOT_APPLICABLE}
    width, bar_h, gap, left = 360.0, 18.0, 8.0, 84.0
    pic = Picture("bars", "calls by transport, read-back and outcome", width=width)
    for i, (name, counts) in enumerate(parts_by_name.items()):
        y = 4 + i * (bar_h + gap)
        total = sum(counts.values()) or 1
        pic.labels.append(fitted(0, y + 13, name, left - 6, FONT))
        x = left
        for value, count in sorted(counts.items(), key=lambda kv: (kv[0] not in good, kv[0])):
            w = (width - left - 4) * count / total
            cls = "good" if value in good else ("skip" if value == "skipped" else "bad")
            label = f"{shown(value)} {count:,}"
            pic.shapes.append(f'<rect class="{cls}" x="{x:.1f}" y="{y:.0f}" width="{w:.1f}" height="{bar_h:.0f}">'
                              f"<title>{esc(label)}</title></rect>")
            if text_width(label, SMALL) + 8 <= w:
                pic.labels.append(Label(x + 4, y + 13, label, label, SMALL, "inbar"))
            x += w
        pic.height = y + bar_h + 4
    return pic

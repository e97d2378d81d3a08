"""Inline SVG pictures: a delegation chain by hop, a state key's timeline, a tool's breakdown.

Pure functions from rows to SVG text. Every label goes through ``esc``; sizes are computed so
each picture has a ``viewBox`` and scales with the page. Colour is never the only signal: a
lost constraint or a lost update is also written out in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import conventions as c
from ._markup import esc, text_of

_BOX_W, _BOX_H, _COL_GAP, _ROW_GAP = 210, 74, 60, 18


def _ids(value: Any) -> list[str]:
    return [text_of(v) for v in value] if isinstance(value, (list, tuple)) else []


def loss_sentence(loss: Mapping[str, Any]) -> str:
    """``C3 last carried at hop 2, lost at hop 3 by agent writer (task T1.1.1.1)``."""
    return (f"{text_of(loss.get('constraint_id'))} last carried at hop {text_of(loss.get('last_hop_carried'))}, "
            f"lost at hop {text_of(loss.get('dropped_at_hop'))} by agent {text_of(loss.get('dropped_by_agent'))} "
            f"(task {text_of(loss.get('dropped_task_id'))})")


def chain_svg(tasks: Sequence[Mapping[str, Any]], losses: Sequence[Mapping[str, Any]]) -> str:
    """Tasks as boxes in columns by hop, arrows parent to child; carried, waived and lost ids."""
    by_hop: dict[int, list[Mapping[str, Any]]] = {}
    for task in tasks:
        by_hop.setdefault(int(task["hop"] or 0), []).append(task)
    lost_at: dict[str, list[str]] = {}
    for loss in losses:
        lost_at.setdefault(text_of(loss.get("dropped_task_id")), []).append(text_of(loss.get("constraint_id")))
    where: dict[str, tuple[int, int]] = {}
    hops = sorted(by_hop)
    for col, hop in enumerate(hops):
        for row, task in enumerate(by_hop[hop]):
            where[text_of(task["task"])] = (20 + col * (_BOX_W + _COL_GAP), 40 + row * (_BOX_H + _ROW_GAP))
    width = 40 + max(len(hops), 1) * (_BOX_W + _COL_GAP)
    height = 60 + max((len(v) for v in by_hop.values()), default=1) * (_BOX_H + _ROW_GAP)
    parts = [f'<svg class="chain" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'><title>delegation chain</title>']
    for col, hop in enumerate(hops):
        parts.append(f'<text class="hop" x="{20 + col * (_BOX_W + _COL_GAP)}" y="24">hop {hop}</text>')
    for task in tasks:
        parent = text_of(task.get("parent"))
        if parent in where:
            (px, py), (cx, cy) = where[parent], where[text_of(task["task"])]
            parts.append(f'<line class="edge" x1="{px + _BOX_W}" y1="{py + _BOX_H // 2}" x2="{cx}" y2="{cy + _BOX_H // 2}"/>')
    for task in tasks:
        name = text_of(task["task"])
        x, y = where[name]
        lost = lost_at.get(name, [])
        carried, waived = _ids(task.get("carried")), _ids(task.get("waived"))
        reasons = _ids(task.get("reasons"))
        cls = "task lost" if lost else "task"
        parts.append(f'<g class="{cls}"><rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="6"/>')
        parts.append(f'<text x="{x + 8}" y="{y + 16}" class="name">{esc(name[:30])}</text>')
        parts.append(f'<text x="{x + 8}" y="{y + 31}">by {esc(text_of(task.get("agent_id"))[:28])}</text>')
        parts.append(f'<text x="{x + 8}" y="{y + 46}" class="carried">carried: {esc(", ".join(carried)[:28] or "none")}</text>')
        if waived:
            why = "; ".join(f"{w} ({r})" for w, r in zip(waived, reasons + [""] * len(waived)))
            parts.append(f'<text x="{x + 8}" y="{y + 61}" class="waived">waived: {esc(why[:30])}<title>{esc(why)}</title></text>')
        if lost:
            parts.append(f'<text x="{x + 8}" y="{y + _BOX_H - 2}" class="lostlabel">LOST: {esc(", ".join(lost)[:26])}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def timeline_svg(events: Sequence[Mapping[str, Any]], lost_spans: set[str], divergent_spans: set[str]) -> str:
    """One lane per agent, events in time order; reads as circles, writes as squares, with versions.

    A write in ``lost_spans`` (a lost update) is marked red and labelled LOST UPDATE; a write in
    ``divergent_spans`` (made on a version another agent had read differently) is marked DIVERGENT.
    """
    agents = list(dict.fromkeys(text_of(e.get("agent_id")) or "(no agent)" for e in events))
    step, lane, left = 110, 56, 130
    width, height = left + step * max(len(events), 1) + 40, 30 + lane * max(len(agents), 1)
    parts = [f'<svg class="timeline" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'><title>reads and writes by agent</title>']
    for i, agent in enumerate(agents):
        y = 30 + i * lane
        parts.append(f'<text class="agent" x="6" y="{y + 4}">{esc(agent[:18])}</text>')
        parts.append(f'<line class="lane" x1="{left - 10}" y1="{y}" x2="{width - 10}" y2="{y}"/>')
    for n, e in enumerate(events):
        x, y = left + n * step, 30 + agents.index(text_of(e.get("agent_id")) or "(no agent)") * lane
        span = text_of(e.get("span_id"))
        outcome = text_of(e.get("outcome"))
        if e.get("tool_kind") == "read":
            label = f"read {text_of(e.get('version_read'))}"
            parts.append(f'<circle class="read" cx="{x}" cy="{y}" r="7"/>')
        else:
            base = text_of(e.get("version_expected")) or "?"
            label = f"{base}→{text_of(e.get('version_written')) or '-'}"
            cls = "write" if outcome in ("ok", "forced") else "write refused"
            if span in lost_spans:
                cls += " lostupdate"
            elif span in divergent_spans:
                cls += " divergent"
            parts.append(f'<rect class="{cls}" x="{x - 7}" y="{y - 7}" width="14" height="14"/>')
            if outcome not in ("ok", ""):
                parts.append(f'<text class="small" x="{x - 30}" y="{y + 30}">{esc(outcome[:22])}</text>')
            if span in lost_spans:
                parts.append(f'<text class="lostlabel" x="{x - 30}" y="{y - 14}">LOST UPDATE</text>')
            elif span in divergent_spans:
                parts.append(f'<text class="divlabel" x="{x - 30}" y="{y - 14}">DIVERGENT</text>')
        parts.append(f'<text class="small" x="{x - 30}" y="{y + 20}">{esc(label[:24])}<title>{esc(label)}</title></text>')
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(parts_by_name: Mapping[str, Mapping[str, int]]) -> str:
    """Three stacked bars (transport, read-back, outcome), each value's share with its count."""
    good = {c.TRANSPORT_OK, c.OUTCOME_OK, c.READBACK_MATCH, c.READBACK_NOT_APPLICABLE}
    width, bar_h, gap, left = 720, 20, 10, 90
    rows = list(parts_by_name.items())
    height = len(rows) * (bar_h + gap) + 10
    out = [f'<svg class="bars" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'><title>calls by transport, read-back and outcome</title>']
    for i, (name, counts) in enumerate(rows):
        y = 5 + i * (bar_h + gap)
        total = sum(counts.values()) or 1
        out.append(f'<text x="0" y="{y + 15}">{esc(name)}</text>')
        x = float(left)
        for value, count in sorted(counts.items(), key=lambda kv: (kv[0] not in good, kv[0])):
            w = (width - left - 10) * count / total
            cls = "good" if value in good else ("skip" if value == "skipped" else "bad")
            label = f"{value} {count}"
            out.append(f'<rect class="{cls}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}"><title>{esc(label)}</title></rect>')
            if w > 8 * len(label):
                out.append(f'<text class="inbar" x="{x + 4:.1f}" y="{y + 15}">{esc(label)}</text>')
            x += w
    out.append("</svg>")
    return "".join(out)

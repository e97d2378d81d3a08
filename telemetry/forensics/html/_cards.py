"""Findings as cards, and the three things to do first.

A card says what happened, to which key, task or tool, by whom and when, the row's verdict (did
the harm happen, did a guard prevent it, or can the evidence not tell) with its basis, the next
step, the command for the question's rows, and the full row folded away: readable on a phone,
never a table that scrolls sideways. Cards are grouped by the row's severity (a prevented row is
never critical: :func:`.._verdicts.row_severity`), happened before unknown before prevented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import conventions as c
from .._questions import QUESTION_NAMES, SEVERITIES, Question
from .._verdicts import row_severity
from ._markup import TRACE_ID_COLUMNS, TraceLinks, command, esc, text_of
from ._stories import TITLES, story

__all__ = [
    "Card", "DO_FIRST", "MAX_CARDS", "VERDICT_LABEL", "card_html", "cards_of", "do_first",
    "do_first_html", "severity_rank", "verdict_of",
]

MAX_CARDS = 25
"""Cards per question (the worst first); the page says how many more rows there are and the command for all."""
MAX_LIST_ITEMS = 20
MAX_VALUE_CHARS = 1_000
"""A value longer than this is cut in the full row (the command gives it whole)."""
DO_FIRST = 3

VERDICT_LABEL = {c.VERDICT_HAPPENED: "Happened", c.VERDICT_PREVENTED: "Prevented", c.VERDICT_UNKNOWN: "Unknown"}
_VERDICT_RANK = {c.VERDICT_HAPPENED: 0, c.VERDICT_UNKNOWN: 1, c.VERDICT_PREVENTED: 2}
_PREVENTED_NEXT = ("Nothing to undo: a guard stopped it. Check that the agent recovered "
                   "(guard_refusals) and keep the guard on.")


def verdict_of(row: Mapping[str, Any]) -> tuple[str, str]:
    """The row's verdict and its basis; a row without a known verdict is unknown, saying why."""
    verdict, basis = row.get("verdict"), text_of(row.get("verdict_basis"))
    if verdict in c.VERDICTS:
        return str(verdict), basis
    if verdict is None:
        return c.VERDICT_UNKNOWN, basis or "the row carries no verdict"
    return c.VERDICT_UNKNOWN, f"the row's verdict {text_of(verdict)!r} is none of {', '.join(c.VERDICTS)}"


def severity_rank(level: str) -> int:
    return SEVERITIES.index(level) if level in SEVERITIES else len(SEVERITIES)


@dataclass(frozen=True)
class Card:
    """One row to show: its question, its place in the question's rows, verdict and severity."""

    question: Question
    index: int
    row: Mapping[str, Any]
    verdict: str
    basis: str
    severity: str

    @property
    def anchor(self) -> str:
        return f"f-{self.question.name}-{self.index}"


def cards_of(question: Question, rows: Sequence[Mapping[str, Any]]) -> list[Card]:
    """Up to :data:`MAX_CARDS` of ``rows`` as cards: happened, then unknown, then prevented, each
    in the question's own order (worst first)."""
    out = []
    for index, row in enumerate(rows):
        verdict, basis = verdict_of(row)
        out.append(Card(question, index, row, verdict, basis, row_severity(question.severity, verdict)))
    out.sort(key=lambda card: (_VERDICT_RANK[card.verdict], card.index))
    return out[:MAX_CARDS]


def _value(column: str, value: Any, links: TraceLinks) -> str:
    if column in TRACE_ID_COLUMNS:
        ids = value if isinstance(value, (list, tuple)) else [value]
        return " ".join(links.link(v) for v in ids[:MAX_LIST_ITEMS] if v is not None)
    if isinstance(value, (list, tuple)) and len(value) > MAX_LIST_ITEMS:
        return esc(text_of(list(value[:MAX_LIST_ITEMS]))) + f" … {len(value) - MAX_LIST_ITEMS:,} more"
    text = text_of(value)
    if len(text) > MAX_VALUE_CHARS:
        return esc(text[:MAX_VALUE_CHARS]) + f" … ({len(text):,} characters in all)"
    return esc(text) if value is not None else '<span class="none">none</span>'


def card_html(card: Card, links: TraceLinks, paths: Sequence[str]) -> str:
    """One card (see the module docstring)."""
    q, row = card.question, card.row
    told = story(q.name, row)
    facts = []
    if told.subject:
        facts.append((told.subject_kind.capitalize() or "Subject", esc(told.subject)))
    if told.who:
        facts.append(("By", esc(told.who)))
    if told.when:
        facts.append(("When", esc(told.when)))
    if row.get("run_id") is not None:
        facts.append(("Run", esc(row["run_id"])))
    trace = row.get("trace_id") if row.get("trace_id") is not None else row.get("example_trace_ids")
    if trace:
        facts.append(("Trace", _value("trace_id", trace, links)))
    facts.append(("Verdict", f"<strong>{esc(VERDICT_LABEL[card.verdict])}</strong>"
                             + (f": {esc(card.basis)}" if card.basis else "")))
    next_step = _PREVENTED_NEXT if card.verdict == c.VERDICT_PREVENTED and q.is_finding else q.next_step
    full = "".join(f"<dt>{esc(k)}</dt><dd>{_value(k, v, links)}</dd>" for k, v in row.items())
    title = esc(TITLES.get(q.name, q.name))
    return (f'<article class="card {esc(card.verdict)}" id="{esc(card.anchor)}">'
            f'<h5><span class="verdict {esc(card.verdict)}">{esc(VERDICT_LABEL[card.verdict])}</span>'
            f'<span class="sev {esc(card.severity)}">{esc(card.severity)}</span> {title}'
            + (f' <span class="subject">{esc(told.subject)}</span>' if told.subject else "") + "</h5>"
            f'<p class="what">{esc(told.what)}</p>'
            '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
            f'<p class="next"><strong>Next:</strong> {esc(next_step)}</p>'
            f'<p class="cmd"><strong>Rows:</strong> <code>{esc(command(["outcome-telemetry", "forensics", "run", q.name, *paths]))}</code></p>'
            f'<details class="row"><summary>Full row</summary><dl class="row">{full}</dl></details></article>')


def do_first(cards: Sequence[Card]) -> list[Card]:
    """The (up to) three cards to act on first: rows that happened, then undecided ones, worst
    severity first, one per question and subject."""
    chosen: list[Card] = []
    seen: set[tuple[str, str]] = set()
    order = {name: i for i, name in enumerate(QUESTION_NAMES)}
    ranked = sorted((card for card in cards if card.verdict != c.VERDICT_PREVENTED and card.question.is_finding),
                    key=lambda card: (_VERDICT_RANK[card.verdict], severity_rank(card.severity),
                                      order.get(card.question.name, len(order)), card.index))
    for card in ranked:
        key = (card.question.name, story(card.question.name, card.row).subject)
        if key not in seen:
            seen.add(key)
            chosen.append(card)
        if len(chosen) == DO_FIRST:
            break
    return chosen


def do_first_html(chosen: Sequence[Card], prevented: int) -> str:
    """The "do first" list, each item linking to its card."""
    if not chosen:
        why = (f"every finding ({prevented:,}) was prevented by a guard" if prevented
               else "nothing was found that happened or could not be judged")
        return f'<section id="do-first"><h2>Do first</h2><p class="clean">Nothing to do first: {esc(why)}.</p></section>'
    items = []
    for card in chosen:
        told = story(card.question.name, card.row)
        subject = f" {told.subject}" if told.subject else ""
        items.append(f'<li><a href="#{esc(card.anchor)}"><strong>{esc(TITLES.get(card.question.name, card.question.name))}'
                     f'{esc(subject)}</strong></a> <span class="verdict {esc(card.verdict)}">'
                     f"{esc(VERDICT_LABEL[card.verdict])}</span><br>{esc(card.question.next_step)}</li>")
    return f'<section id="do-first"><h2>Do first</h2><ol class="first">{"".join(items)}</ol></section>'

"""The HTML report page: one self-contained file (inline CSS and SVG, no script, nothing fetched).

It is the page on-call opens: at the top how many incidents happened, were prevented or could
not be judged, and the three things to do first (each a link to its card); then the evidence in
sentences, the findings as cards, the delegation chains, the state keys' timelines and the
tools. It is meant to be attached to a ticket and opened anywhere, with scripts off and no
network, on a phone or on paper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ... import conventions as c
from .._questions import Question
from .._verdicts import headline, tally
from . import _data
from ._cards import MAX_CARDS, Card, card_html, cards_of, do_first, do_first_html, severity_rank
from ._diagrams import bars_picture, chain_picture, loss_sentence, timeline_picture
from ._evidence import evidence_section, plural
from ._markup import TraceLinks, command, esc, text_of
from ._stories import TITLES
from ._style import CSS

if TYPE_CHECKING:
    from .._api import Forensics

__all__ = ["render_html"]

_KEY_QUESTIONS = ("lost_updates", "divergent_reads", "unpersisted_writes", "readback_mismatches")
_SPAN_COLUMNS = ("span_id", "write_span_id", "earlier_span_id", "read_span_id")
_NAV = (("do-first", "do first"), ("evidence", "evidence"), ("findings", "findings"), ("records", "records"),
        ("chains", "chains"), ("keys", "state keys"), ("tools", "tools"))


def _rows_command(q: Question, paths: Sequence[str]) -> str:
    return f"<code>{esc(command(['outcome-telemetry', 'forensics', 'run', q.name, *paths]))}</code>"


def _group(traces: Forensics, cards: Mapping[str, list[Card]], rows: Mapping[str, Sequence[Any]],
           level: str, links: TraceLinks) -> list[str]:
    """One severity's cards, question by question, each under its description and caveats."""
    out = []
    evidence = getattr(traces, "evidence", None)
    for q in traces.questions:
        mine = [card for card in cards.get(q.name, []) if card.severity == level]
        if not mine:
            continue
        total, shown = len(rows[q.name]), len(cards[q.name])
        out.append(f'<section class="question" id="q-{esc(q.name)}-{esc(level)}"><h4>{esc(TITLES.get(q.name, q.name))} '
                   f"<code>{esc(q.name)}</code>: {plural(len(mine), 'row')}</h4><p class=\"desc\">{esc(q.description)}</p>")
        notes = evidence.caveats(q.name) if evidence is not None else []
        if notes:
            out.append('<ul class="caveats">' + "".join(f"<li><strong>Caveat:</strong> {esc(n)}</li>" for n in notes)
                       + "</ul>")
        out += [card_html(card, links, traces.paths) for card in mine]
        if total > shown:
            out.append(f'<p class="notes">{total - shown:,} more {q.name} row(s) are not shown as cards (the first '
                       f"{MAX_CARDS} are, happened first); all of them: {_rows_command(q, traces.paths)}</p>")
        out.append("</section>")
    return out


def _findings(traces: Forensics, cards: Mapping[str, list[Card]], rows: Mapping[str, Sequence[Any]],
              links: TraceLinks) -> list[str]:
    out = ['<section id="findings"><h2>Findings</h2>']
    finding = {q.name: cards[q.name] for q in traces.questions if q.is_finding}
    levels = sorted({card.severity for group in finding.values() for card in group}, key=severity_rank)
    if not levels:
        out.append('<p class="clean">No findings.</p>')
    for level in levels:
        n = sum(1 for group in finding.values() for card in group if card.severity == level)
        out.append(f'<h3 id="sev-{esc(level)}"><span class="sev {esc(level)}">{esc(level)}</span> {plural(n, "row")}</h3>')
        out += _group(traces, finding, rows, level, links)
    out.append("</section>")
    records = {q.name: cards[q.name] for q in traces.questions if not q.is_finding}
    out.append('<section id="records"><h2>Records</h2><p class="desc">Explicit decisions and refusals the guards '
               "made: reported, not problems.</p>")
    levels = sorted({card.severity for group in records.values() for card in group}, key=severity_rank)
    for level in levels:
        out += _group(traces, records, rows, level, links)
    if not levels:
        out.append("<p>No waivers and no refusals.</p>")
    out.append("</section>")
    evidence = getattr(traces, "evidence", None)
    unjudged = {q.name: evidence.not_judged(q.name) for q in traces.questions
                if not rows[q.name] and evidence is not None and evidence.not_judged(q.name)}
    if unjudged:
        out.append('<section id="not-judged"><h3>Not judged</h3><p>Nothing in these traces carries what these '
                   'questions need, so their silence says nothing:</p><ul class="notjudged">'
                   + "".join(f"<li><code>{esc(name)}</code>: {esc(reason)}</li>" for name, reason in unjudged.items())
                   + "</ul></section>")
    clean = [q.name for q in traces.questions if not rows[q.name] and q.name not in unjudged]
    if clean:
        out.append(f'<p class="notes">Nothing found: {esc(", ".join(clean))}</p>')
    return out


def _chains(traces: Forensics, losses: Sequence[Mapping[str, Any]]) -> list[str]:
    lossy = list(dict.fromkeys((text_of(r.get("run_id")), text_of(r.get("root_task_id"))) for r in losses))
    keys, total = _data.chain_keys(traces.connection, lossy)
    out = ['<section id="chains"><h2>Delegation chains</h2>']
    if not keys:
        return out + ["<p>No delegation chains in these traces.</p></section>"]
    if total > len(keys):
        out.append(f'<p class="notes">{len(keys)} of {total:,} chains drawn, those with a lost constraint first.</p>')
    for i, (run_id, root, count) in enumerate(keys):
        mine = [r for r in losses if text_of(r.get("run_id")) == run_id and text_of(r.get("root_task_id")) == root]
        marked = [text_of(r.get(k)) for r in mine for k in ("dropped_task_id", "parent_task_id") if r.get(k) is not None]
        chain = _data.chain(traces.connection, run_id, root, count, marked)
        out.append(f'<section class="chain" id="chain-{i}"><h3>chain {esc(root)} <small>in run {esc(run_id)}</small></h3>')
        if mine:
            out.append('<ul class="losses">' + "".join(f"<li>{esc(loss_sentence(r))}</li>" for r in mine) + "</ul>")
        else:
            out.append('<p class="clean">Every root constraint carried or waived at every hop.</p>')
        if len(chain.tasks) < count:
            out.append(f'<p class="notes">{len(chain.tasks)} of {count:,} tasks drawn ({count - len(chain.tasks):,} left '
                       "out): each task that lost a constraint and the one before it, the first hops, the tasks that "
                       "waived something, then by hop.</p>")
        out.append(chain_picture(chain, mine).svg() + "</section>")
    return out + ["</section>"]


def _keys(traces: Forensics, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    keys: dict[tuple[str, str], list[str]] = {}
    for name in _KEY_QUESTIONS:
        for r in rows[name]:
            if r.get("state_key") is not None and r.get("run_id") is not None:
                marks = keys.setdefault((text_of(r["run_id"]), text_of(r["state_key"])), [])
                marks += [text_of(r[k]) for k in _SPAN_COLUMNS if r.get(k) is not None]
    lost = {text_of(r.get("span_id")) for r in rows["lost_updates"]}
    lost |= {text_of(r.get("write_span_id")) for r in rows["divergent_reads"] if r.get("lost_update")}
    divergent = {text_of(r.get("write_span_id")) for r in rows["divergent_reads"]}
    out = ['<section id="keys"><h2>State keys with findings</h2>']
    if not keys:
        return out + ["<p>No state key has a finding.</p></section>"]
    if len(keys) > _data.MAX_KEYS:
        out.append(f'<p class="notes">{_data.MAX_KEYS} of {len(keys):,} keys drawn.</p>')
    out.append('<p class="desc">One row per read or write, in time order; one lane per agent. Circles are reads, '
               "squares writes (the version expected → the version written); a lost update, a divergent write and a "
               "refused write are said in words beside them.</p>")
    for i, ((run_id, key), marks) in enumerate(list(keys.items())[: _data.MAX_KEYS]):
        events, total = _data.key_events(traces.connection, run_id, key, marks)
        out.append(f'<section class="key" id="key-{i}"><h3>{esc(key)} <small>in run {esc(run_id)}</small></h3>')
        if total > len(events):
            out.append(f'<p class="notes">{len(events)} of {total:,} reads and writes drawn: the first ones and those '
                       "around each finding.</p>")
        out.append(timeline_picture(events, total, lost, divergent).svg() + "</section>")
    return out + ["</section>"]


def _tools(traces: Forensics) -> list[str]:
    breakdown, total = _data.tool_breakdown(traces.connection)
    out = ['<section id="tools"><h2>Calls per tool: transport, read-back, outcome</h2>']
    if not breakdown:
        return out + ["<p>No tool spans.</p></section>"]
    if total > len(breakdown):
        out.append(f'<p class="notes">{len(breakdown)} of {total:,} tools drawn (by name).</p>')
    for tool, parts in breakdown.items():
        words = "; ".join(f"{part}: " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
                          for part, counts in parts.items())
        out.append(f'<section class="tool"><h3>{esc(tool)}</h3><p class="desc">{esc(words)}</p>'
                   f"{bars_picture(parts).svg()}</section>")
    return out + ["</section>"]


def _top(traces: Forensics, rows: Mapping[str, Sequence[Mapping[str, Any]]],
         cards: Mapping[str, list[Card]]) -> list[str]:
    """The title, the verdict counts (headline and tiles) and the three things to do first."""
    finding_rows = {q.name: rows[q.name] for q in traces.questions if q.is_finding}
    counts = tally(finding_rows)
    findings = sum(len(v) for v in finding_rows.values())
    records = sum(len(rows[q.name]) for q in traces.questions if not q.is_finding)
    tiles = "".join(f'<div class="tile {esc(v)}"><b>{counts.get(v, 0):,}</b>{esc(label)}</div>' for v, label in (
        (c.VERDICT_HAPPENED, "happened"), (c.VERDICT_PREVENTED, "prevented by guards"),
        (c.VERDICT_UNKNOWN, "could not be judged")))
    every = [card for group in cards.values() for card in group]
    return [
        "<header><h1>Forensics report</h1>",
        f'<p class="sub">{findings:,} finding(s) and {records:,} record(s) (waivers and refusals: reported, not '
        f"problems) over {esc(' '.join(traces.paths))}.</p>",
        f'<p class="headline">{esc(headline(counts))}</p><div class="tiles">{tiles}</div></header>',
        do_first_html(do_first(every), counts.get(c.VERDICT_PREVENTED, 0)),
        "<nav>" + " · ".join(f'<a href="#{a}">{esc(label)}</a>' for a, label in _NAV) + "</nav>",
    ]


def render_html(traces: Forensics, *, trace_url: str | None = None,
                answers: Mapping[str, list[dict[str, Any]]] | None = None) -> str:
    """The whole report page for the loaded traces; ``trace_url`` links trace ids (validated).
    ``answers`` (from :meth:`Forensics.answers`) saves running every question again."""
    links = TraceLinks(trace_url)
    given = traces.answers() if answers is None else answers
    rows = {q.name: list(given.get(q.name, [])) for q in traces.questions}
    cards = {q.name: cards_of(q, rows[q.name]) for q in traces.questions}
    body = _top(traces, rows, cards)
    evidence = getattr(traces, "evidence", None)
    body.append('<section id="evidence"><h2>Evidence</h2>'
                + evidence_section(evidence, traces.load_report, traces.questions) + "</section>")
    body += _findings(traces, cards, rows, links)
    body += _chains(traces, rows["constraint_loss_by_hop"])
    body += _keys(traces, rows)
    body += _tools(traces)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta name=\"color-scheme\" content=\"light dark\">"
            f"<title>Forensics report</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")

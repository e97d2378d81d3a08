"""The HTML report page: one self-contained file (inline CSS and SVG, no script, nothing fetched).

It is meant to be attached to a ticket and opened anywhere, with scripts off and no network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._questions import SEVERITIES
from . import _data
from ._diagrams import bars_svg, chain_svg, loss_sentence, timeline_svg
from ._markup import TraceLinks, esc, evidence, table, text_of

if TYPE_CHECKING:
    from .._api import Forensics

MAX_ROWS = 200
"""Rows shown per question; the page says how many more there are and the command for all."""
_KEY_QUESTIONS = ("lost_updates", "divergent_reads", "unpersisted_writes", "readback_mismatches")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;color:#1b1f23;background:#fff}
h1{font-size:1.5em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{margin-bottom:.3em}code{font:12px ui-monospace,monospace}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:12px;margin:.4em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.sev{display:inline-block;padding:0 .5em;border-radius:3px;color:#fff;font-weight:bold}
.critical{background:#b3261e}.warning{background:#b36b00}.record{background:#4a6fa5}
.next{background:#fff8e1;border-left:4px solid #b36b00;padding:.3em .6em}.ok{color:#1e7b34}.warn{color:#b3261e}
dl.evidence{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dt{font-weight:bold}dd{margin:0}
svg text{font:11px ui-monospace,monospace;fill:#1b1f23}svg .hop{font-weight:bold}
.task rect{fill:#eef3fb;stroke:#4a6fa5}.task.lost rect{fill:#fdecea;stroke:#b3261e;stroke-width:2}
.edge{stroke:#888;stroke-width:1.5}.name{font-weight:bold}.waived{fill:#4a6fa5}.lostlabel{fill:#b3261e;font-weight:bold}
.divlabel{fill:#b36b00;font-weight:bold}.lane{stroke:#ccc}.read{fill:#4a6fa5}.write{fill:#1e7b34}
.write.refused{fill:#999}.write.lostupdate{fill:#b3261e}.write.divergent{fill:#b36b00}.small{font-size:10px}
.bars .good{fill:#1e7b34}.bars .bad{fill:#b3261e}.bars .skip{fill:#bbb}.bars .inbar{fill:#fff}
ul.losses li{color:#b3261e;font-weight:bold}
"""


def _findings(traces: Forensics, rows: Mapping[str, list[dict[str, Any]]], links: TraceLinks) -> list[str]:
    out = ['<h2 id="findings">Findings by severity</h2>']
    paths = " ".join(traces.paths)
    for level in SEVERITIES:
        questions = [q for q in traces.questions if q.severity == level and rows[q.name]]
        if not questions:
            continue
        out.append(f'<h3><span class="sev {level}">{esc(level.upper())}</span></h3>')
        for q in questions:
            found = rows[q.name]
            noun = "finding(s)" if q.is_finding else "record(s)"
            out.append(f'<section id="q-{esc(q.name)}"><h4>{esc(q.name)}: {len(found)} {noun}</h4><p>{esc(q.description)}</p>')
            caveats = getattr(traces, "evidence", None)
            for note in (caveats.caveats(q.name) if caveats is not None else []):
                out.append(f'<p class="warn">note: {esc(note)}</p>')
            out.append(table(found[:MAX_ROWS], list(found[0]), links))
            if len(found) > MAX_ROWS:
                out.append(f"<p>({len(found) - MAX_ROWS} more rows)</p>")
            out.append(f'<p class="next">next: {esc(q.next_step)}<br>rows: '
                       f'<code>outcome-telemetry forensics run {esc(q.name)} {esc(paths)}</code></p></section>')
    evidence = getattr(traces, "evidence", None)
    unjudged = {q.name: evidence.not_judged(q.name) for q in traces.questions
                if not rows[q.name] and evidence is not None and evidence.not_judged(q.name)}
    if unjudged:
        out.append('<h3 id="not-judged">Not judged</h3><p>Nothing in these traces carries what these questions '
                   'need, so their silence says nothing:</p><ul class="notjudged">'
                   + "".join(f"<li><code>{esc(name)}</code>: {esc(reason)}</li>" for name, reason in unjudged.items())
                   + "</ul>")
    clean = [q.name for q in traces.questions if not rows[q.name] and q.name not in unjudged]
    if clean:
        out.append(f"<p>Nothing found: {esc(', '.join(clean))}</p>")
    return out


def _formats(traces: Forensics) -> list[str]:
    """The evidence per source format: one row each (counts, settings and limits, never content)."""
    evidence = getattr(traces, "evidence", None)
    formats = evidence.formats if evidence is not None else None
    if formats is None or not formats.formats and not formats.unselected_function_spans:
        return []
    head = ("format", "spans", "tool calls", "without a result", "results skipped", "inferred", "not understood",
            "content setting", "cannot tell")
    body = []
    for f in formats.formats.values():
        inferred = ", ".join(f"{what} {n}" for what, n in sorted(f.inferred.items()))
        skipped = f.results_too_large + f.results_malformed
        understood = ", ".join(f"{reason}: {n}" for reason, n in sorted(f.not_understood.items()))
        cells = (f.name, f.spans, f.tool_calls, f.without_result, skipped, inferred, understood,
                 f.content_setting if f.name != "outcome-telemetry" else "", f.cannot_tell)
        body.append("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in cells) + "</tr>")
    out = ['<h3 id="formats">Span formats</h3>',
           '<div class="scroll"><table><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head)
           + f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"]
    if formats.unselected_function_spans:
        out.append(f'<p class="warn">{esc(formats.unselected_function_spans)} function span(s) (code.function) that no '
                   'format marks were not judged: select them with <code>--tool-spans</code>.</p>')
    return out


def _chains(traces: Forensics, losses: list[dict[str, Any]]) -> list[str]:
    lossy = list(dict.fromkeys(text_of(r.get("root_task_id")) for r in losses))
    chains = _data.chains(traces.connection, lossy)
    out = ['<h2 id="chains">Delegation chains</h2>']
    if not chains:
        return out + ["<p>No delegation chains in these traces.</p>"]
    for root, tasks in chains.items():
        mine = [r for r in losses if text_of(r.get("root_task_id")) == root]
        out.append(f'<section class="chain-section"><h3>chain {esc(root)}</h3>')
        if mine:
            out.append('<ul class="losses">' + "".join(f"<li>{esc(loss_sentence(r))}</li>" for r in mine) + "</ul>")
        else:
            out.append('<p class="ok">Every root constraint carried or waived at every hop.</p>')
        out.append(f'<div class="scroll">{chain_svg(tasks, mine)}</div></section>')
    return out


def _keys(traces: Forensics, rows: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    keys: dict[tuple[str, str], None] = {}
    for name in _KEY_QUESTIONS:
        for r in rows[name]:
            if r.get("state_key") is not None and r.get("run_id") is not None:
                keys[(text_of(r["run_id"]), text_of(r["state_key"]))] = None
    lost = {text_of(r.get("span_id")) for r in rows["lost_updates"]}
    lost |= {text_of(r.get("write_span_id")) for r in rows["divergent_reads"] if r.get("lost_update")}
    divergent = {text_of(r.get("write_span_id")) for r in rows["divergent_reads"]}
    out = ['<h2 id="keys">State keys with findings</h2>']
    if not keys:
        return out + ["<p>No state key has a finding.</p>"]
    for run_id, key in list(keys)[: _data.MAX_KEYS]:
        events = _data.key_events(traces.connection, run_id, key)
        out.append(f"<section><h3>{esc(key)} <small>in run {esc(run_id)}</small></h3>")
        out.append("<p>Circles are reads (the version read), squares writes (expected→written); "
                   "red: a lost update, orange: a write on a version another agent read differently, "
                   "grey: refused.</p>")
        out.append(f'<div class="scroll">{timeline_svg(events, lost, divergent)}</div></section>')
    return out


def _tools(traces: Forensics, links: TraceLinks) -> list[str]:
    breakdown = _data.tool_breakdown(traces.connection)
    out = ['<h2 id="tools">Calls per tool: transport, read-back, outcome</h2>']
    if not breakdown:
        return out + ["<p>No tool spans.</p>"]
    for tool, parts in breakdown.items():
        words = "; ".join(f"{part}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                          for part, counts in parts.items())
        out.append(f"<section><h3>{esc(tool)}</h3><p>{esc(words)}</p>{bars_svg(parts)}</section>")
    return out


def render_html(traces: Forensics, *, trace_url: str | None = None,
                answers: Mapping[str, list[dict[str, Any]]] | None = None) -> str:
    """The whole report page for the loaded traces; ``trace_url`` links trace ids (validated).
    ``answers`` (from :meth:`Forensics.answers`) saves running every question again."""
    links = TraceLinks(trace_url)
    rows = traces.answers() if answers is None else answers
    findings = sum(len(rows[q.name]) for q in traces.questions if q.is_finding)
    records = sum(len(rows[q.name]) for q in traces.questions if not q.is_finding)
    body = [
        "<h1>outcome-telemetry forensics report</h1>",
        f"<p><strong>{findings} finding(s)</strong> and {records} record(s) (waivers and refusals: reported, "
        f"not problems) over {esc(' '.join(traces.paths))}.</p>",
        '<nav><a href="#evidence">evidence</a> · <a href="#findings">findings</a> · <a href="#chains">chains</a>'
        ' · <a href="#keys">state keys</a> · <a href="#tools">tools</a></nav>',
        '<h2 id="evidence">Evidence</h2>',
        evidence(getattr(traces, "evidence", traces.load_report)),
    ]
    body += _formats(traces)
    body += _findings(traces, rows, links)
    body += _chains(traces, rows["constraint_loss_by_hop"])
    body += _keys(traces, rows)
    body += _tools(traces, links)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>outcome-telemetry forensics report</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")

"""The evidence section as a person reads it: one paragraph of sentences, the caveats set apart,
and every raw figure in a collapsed block.

On-call needs to know in one glance whether the answers below can be trusted ("465 spans from 1
file; no duplicates; no clock skew; 2 delegation chains, both complete") and what could change
them (the caveats, highlighted). The figures behind the sentences stay on the page, collapsed,
as nested lists rather than JSON.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ... import conventions as c
from .._evidence import SKEW_TOLERANCE_NS
from ._markup import esc, text_of

if TYPE_CHECKING:
    from .._evidence import Evidence
    from .._loading import LoadReport
    from .._questions import Question

__all__ = ["caveats", "evidence_section", "formats_section", "plural", "raw", "sentences"]

RAW_ITEMS = 20
"""List items shown per list in the raw figures (the count is always given)."""
_RAW_DEPTH = 4


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,204 spans``."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _chains_phrase(evidence: Evidence) -> str:
    n = evidence.chains
    if not n:
        return "no delegation chains"
    broken = evidence.chains_without_root_count + evidence.gap_count
    if not broken:
        whole = "complete" if n == 1 else "both complete" if n == 2 else "all complete"
        return f"{plural(n, 'delegation chain')}, {whole}"
    parts = []
    if evidence.chains_without_root_count:
        parts.append(f"{evidence.chains_without_root_count:,} without their root registration")
    if evidence.gap_count:
        parts.append(f"{plural(evidence.gap_count, 'task')} with a missing parent hop")
    return f"{plural(n, 'delegation chain')} ({', '.join(parts)})"


def sentences(evidence: Evidence | None, load: LoadReport) -> list[str]:
    """The evidence as short clauses, e.g. ``465 spans from 1 file``, ``no duplicates``."""
    origin = load.source or plural(load.files, "file")
    out = [f"{plural(load.spans, 'span')} from {origin}"]
    d = load.duplicates
    out.append("no duplicates" if not d.dropped and not d.conflicting else
               f"{plural(d.dropped, 'duplicate copy', 'duplicate copies')} dropped"
               + (f", {d.conflicting:,} with differing content" if d.conflicting else ""))
    if load.skipped_lines or load.truncated:
        out.append(f"{plural(load.skipped_lines, 'bad line')} skipped, {plural(len(load.truncated), 'truncated file')}")
    if load.skipped_row_count:
        out.append(f"{plural(load.skipped_row_count, 'malformed row')} skipped")
    if evidence is None:
        return out
    if evidence.spans_kept != load.spans:
        out[0] += f" ({evidence.spans_kept:,} kept)"
    formats = [(f.name, f.tool_calls) for f in evidence.formats.formats.values() if f.tool_calls]
    calls = plural(evidence.tool_spans, "tool call")
    if any(name != c.FORMAT_OURS for name, _ in formats):
        calls += " (" + ", ".join(f"{n:,} {name}" for name, n in formats) + ")"
    out.append(calls)
    if evidence.clock_skew:
        out.append(f"clock skew in {plural(len(evidence.clock_skew), 'service')}")
    else:
        out.append("no clock skew" + ("" if evidence.load.parent_spans is None else " seen"))
    out.append(_chains_phrase(evidence))
    return out


def caveats(evidence: Evidence | None, load: LoadReport, questions: Sequence[Question]) -> list[str]:
    """What could change the answers: the evidence's warnings and the questions it could not judge."""
    out = list(evidence.warnings() if evidence is not None else load.warnings())
    if evidence is not None:
        blind = [q.name for q in questions if evidence.not_judged(q.name)]
        if blind:
            whose = "its" if len(blind) == 1 else "their"
            out.append(f"{plural(len(blind), 'question')} could not judge anything, so {whose} silence says nothing: "
                       f"{', '.join(blind)} (see Not judged below)")
        if evidence.load.parent_spans is not None:
            out.append(f"clock skew was judged on tool spans and the {evidence.load.parent_spans:,} span(s) that "
                       "parent them only; skew between other spans is not seen")
    return out


def raw(value: Any, depth: int = 0) -> str:
    """Any figure as HTML: mappings as definition lists, lists as their count and first items."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping) and value and depth < _RAW_DEPTH:
        items = "".join(f"<dt>{esc(text_of(k).replace('_', ' '))}</dt><dd>{raw(v, depth + 1)}</dd>"
                        for k, v in value.items())
        return f'<dl class="raw">{items}</dl>'
    if isinstance(value, (list, tuple)) and value and depth < _RAW_DEPTH:
        shown = "".join(f"<li>{raw(v, depth + 1)}</li>" for v in value[:RAW_ITEMS])
        more = f"<li>… {len(value) - RAW_ITEMS:,} more</li>" if len(value) > RAW_ITEMS else ""
        return f"{len(value):,}:<ul>{shown}{more}</ul>"
    if isinstance(value, (Mapping, list, tuple)) and not value:
        return "none"
    if isinstance(value, float):
        return esc(f"{value:,.3f}")
    if isinstance(value, int) and not isinstance(value, bool):
        return esc(f"{value:,}")
    return esc(value) if value is not None else "none"


def formats_section(evidence: Evidence | None) -> str:
    """Per source format, when another instrumentation's spans were read: a narrow table of the
    counts, and what was inferred, not understood and cannot be told, in sentences under it."""
    formats = evidence.formats if evidence is not None else None
    if formats is None or (all(name == c.FORMAT_OURS for name in formats.formats)
                           and not formats.unselected_function_spans):
        return ""
    head = ("format", "spans", "tool calls", "without a result", "results skipped")
    body, notes = [], []
    for f in formats.formats.values():
        cells = (f.name, f"{f.spans:,}", f"{f.tool_calls:,}", f"{f.without_result:,}",
                 f"{f.results_too_large + f.results_malformed:,}")
        body.append("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in cells) + "</tr>")
        if f.name == c.FORMAT_OURS:
            continue
        said = []
        if f.inferred:
            said.append("inferred " + ", ".join(f"{what} ({n:,})" for what, n in sorted(f.inferred.items())))
        said += [f"not understood: {reason} ({n:,})" for reason, n in sorted(f.not_understood.items())]
        if f.without_result and f.content_setting:
            said.append(f"to record results: {f.content_setting}")
        if f.tool_calls and f.cannot_tell:
            said.append(f"cannot tell {f.cannot_tell}")
        if said:
            notes.append(f"<li><strong>{esc(f.name)}</strong>: {esc('; '.join(said))}</li>")
    if formats.unselected_function_spans:
        notes.append(f"<li>{formats.unselected_function_spans:,} function span(s) (code.function) that no format "
                     "marks were not judged: select them with <code>--tool-spans</code>.</li>")
    return ('<h3 id="formats">Span formats</h3><table class="formats"><thead><tr>'
            + "".join(f"<th>{esc(h)}</th>" for h in head) + f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
            + (f'<ul class="notes">{"".join(notes)}</ul>' if notes else ""))


def evidence_section(evidence: Evidence | None, load: LoadReport, questions: Sequence[Question]) -> str:
    """The whole evidence section: sentences, highlighted caveats, raw figures collapsed."""
    said = "; ".join(sentences(evidence, load))
    out = [f'<p class="facts">{esc(said[:1].upper() + said[1:])}.</p>']
    notes = caveats(evidence, load, questions)
    if notes:
        out.append('<ul class="caveats">' + "".join(f'<li><strong>Caveat:</strong> {esc(n)}</li>' for n in notes)
                   + "</ul>")
    else:
        out.append('<p class="clean">No caveats: nothing in the input limits the answers below.</p>')
    if evidence is not None:
        tolerance = f"clock skew tolerance {SKEW_TOLERANCE_NS / 1e6:g} ms"
        figures = raw(evidence.as_dict())
    else:
        tolerance, figures = "", raw(dataclasses.asdict(load)) if dataclasses.is_dataclass(load) else ""
    out.append(formats_section(evidence))
    out.append(f'<details class="rawfigures"><summary>Raw figures{esc(" (" + tolerance + ")" if tolerance else "")}'
               f"</summary>{figures}</details>")
    return "".join(out)

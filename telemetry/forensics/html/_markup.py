"""Escaping and the small HTML building blocks every part of the page shares.

Everything that comes from traces (agent names, keys, ids, messages) goes through :func:`esc`
before it reaches the page, in element text and in attribute values alike; nothing is ever
inserted raw. Links come only from :class:`TraceLinks`, which percent-encodes the id into a
template validated once.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from ...exceptions import ForensicsInputError

PLACEHOLDER = "{trace_id}"
_TRACE_ID_COLUMNS = frozenset({"trace_id", "example_trace_ids"})


def esc(value: Any) -> str:
    """``value`` as HTML text, safe in element content and in quoted attribute values."""
    return html.escape(text_of(value), quote=True)


def text_of(value: Any) -> str:
    """A cell's plain text: timestamps as ISO, lists and mappings as JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


class TraceLinks:
    """Turns trace ids into links through a URL template such as a Grafana Explore or Jaeger URL.

    The template must be an absolute ``http``/``https`` URL containing ``{trace_id}`` exactly
    once and no other brace; the id is percent-encoded (every reserved character) before it is
    put in, so an id like ``javascript:alert(1)`` or ``"><script>`` stays inert text in a URL.
    """

    def __init__(self, template: str | None) -> None:
        self.template = None if template is None else validate_trace_url(template)

    def link(self, trace_id: Any) -> str:
        """The id as HTML: an ``<a>`` when a template is set, else escaped text."""
        text = text_of(trace_id)
        if self.template is None or not text:
            return f"<code>{esc(text)}</code>"
        href = self.template.replace(PLACEHOLDER, quote(text, safe=""))
        return f'<a href="{esc(href)}" rel="noreferrer noopener"><code>{esc(text)}</code></a>'


def validate_trace_url(template: str) -> str:
    """Return ``template`` when it is usable; raise :class:`ForensicsInputError` naming the problem."""
    if template.count(PLACEHOLDER) != 1:
        raise ForensicsInputError(
            f"--trace-url {template!r} must contain {PLACEHOLDER} exactly once, e.g. "
            f"'http://localhost:16686/trace/{PLACEHOLDER}' (Jaeger)"
        )
    rest = template.replace(PLACEHOLDER, "")
    if "{" in rest or "}" in rest:
        raise ForensicsInputError(f"--trace-url {template!r} has a brace other than {PLACEHOLDER}; encode it as %7B/%7D")
    if re.search(r"[\s\"'<>`\\]", rest):
        raise ForensicsInputError(f"--trace-url {template!r} contains a space, quote, angle bracket or backslash; percent-encode it")
    parts = urlsplit(rest)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ForensicsInputError(
            f"--trace-url {template!r} must be an absolute http:// or https:// URL (got scheme {parts.scheme!r})"
        )
    return template


def cell(column: str, value: Any, links: TraceLinks) -> str:
    """One table cell: trace ids become links, everything else escaped text."""
    if column in _TRACE_ID_COLUMNS:
        ids = value if isinstance(value, (list, tuple)) else [value]
        return " ".join(links.link(v) for v in ids if v is not None)
    return esc(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], links: TraceLinks) -> str:
    """An HTML table of every row (full values; the page scrolls sideways when it must)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(c, r.get(c), links)}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def evidence(obj: Any) -> str:
    """A definition list of whatever evidence object loading produced.

    It renders the object's ``as_dict()`` (else a dataclass's fields; lists as their count and
    first items, nested mappings as JSON) and, when it has a ``warnings()`` method, its warnings,
    so whatever evidence loading gathers shows without changes here.
    """
    items: list[tuple[str, Any]] = []
    as_dict = getattr(obj, "as_dict", None)
    if callable(as_dict):
        items = list(as_dict().items())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    elif isinstance(obj, Mapping):
        items = list(obj.items())
    rows = []
    for name, value in items:
        if isinstance(value, (list, tuple)):
            shown = f"{len(value)}" + (": " + ", ".join(text_of(v) for v in value[:5]) if value else "")
        elif isinstance(value, Mapping):
            shown = text_of(dict(value))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            shown = text_of(dataclasses.asdict(value))
        elif isinstance(value, float):
            shown = f"{value:.3f}"
        else:
            shown = text_of(value)
        rows.append(f"<dt>{esc(name.replace('_', ' '))}</dt><dd>{esc(shown)}</dd>")
    warnings = obj.warnings() if callable(getattr(obj, "warnings", None)) else []
    notes = "".join(f'<li class="warn">{esc(w)}</li>' for w in warnings)
    verdict = f"<ul>{notes}</ul>" if notes else '<p class="ok">No loading warnings.</p>'
    return f'<dl class="evidence">{"".join(rows)}</dl>{verdict}'

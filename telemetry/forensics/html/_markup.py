"""Escaping and the small HTML building blocks every part of the page shares.

Everything that comes from traces (agent names, keys, ids, messages) goes through :func:`esc`
before it reaches the page, in element text and in attribute values alike; nothing is ever
inserted raw. Links come only from :class:`TraceLinks`, which percent-encodes the id into a
template validated once.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import re
import shlex
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from ...exceptions import ForensicsInputError
from .._evidence import printable

__all__ = ["TRACE_ID_COLUMNS", "TraceLinks", "command", "esc", "plain", "text_of", "validate_trace_url"]

PLACEHOLDER = "{trace_id}"
TRACE_ID_COLUMNS = frozenset({"trace_id", "example_trace_ids"})
"""Row columns holding trace ids: shown as links when the page has a ``--trace-url``."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def plain(value: Any) -> str:
    """``value``'s text (:func:`text_of`) with control characters, bidirectional overrides and
    lone surrogates written out (``\\x1b``, ``\\u202e``): on the page they would reorder or hide
    text, and a lone surrogate cannot even be written as UTF-8."""
    return printable(_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text_of(value)))


def esc(value: Any) -> str:
    """``value`` as HTML text (:func:`plain`), safe in element content and in quoted attribute values."""
    return html.escape(plain(value), quote=True)


def command(words: Sequence[str]) -> str:
    """A shell command line of ``words``, each quoted as the shell needs (escape it for the page)."""
    return " ".join(shlex.quote(plain(w)) for w in words)


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
        text = plain(trace_id)
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

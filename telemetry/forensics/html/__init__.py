"""The forensics report as one self-contained HTML file (``forensics report PATHS --html FILE``).

Inline CSS and SVG only: no script, nothing fetched, readable offline and with scripts off, so
it can be attached to a ticket. Every value from the traces is escaped; trace-id links come
from a validated template with the id percent-encoded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._markup import TraceLinks, validate_trace_url
from ._page import render_html

if TYPE_CHECKING:
    from .._api import Forensics

__all__ = ["TraceLinks", "render_html", "validate_trace_url", "write_html"]


def write_html(traces: Forensics, path: str | os.PathLike[str], *, trace_url: str | None = None,
               answers: Mapping[str, list[dict[str, Any]]] | None = None) -> Path:
    """Render the page and write it to ``path`` (UTF-8); return the path written. ``answers``
    (from :meth:`Forensics.answers`) saves running every question again."""
    target = Path(path)
    page = render_html(traces, trace_url=trace_url, answers=answers)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target

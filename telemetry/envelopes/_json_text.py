"""A recorded text parsed as JSON when it is a JSON object, array or string: one parser for every reader.

Forensics reads a recorded argument text and a recorded result text for every tool call another
instrumentation traced, and ``observe_tool_spans`` reads results live, so this runs once per call
on the hot path of both. It answers exactly what ``json.loads`` answers (the same scanner, the
same rules: only space, tab, newline and carriage return around the value, a BOM refused) without
``json.loads``' Python wrapper around the scanner (a regular expression match each side and a
decoder object's method calls), which cost as much as the scan itself on the short texts tools
return. A text that is not JSON, not a JSON object, array or string, or too deeply nested to
parse is given back as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["json_or_text"]

_WHITESPACE = " \t\n\r"
"""What ``json.loads`` skips around a value (its WHITESPACE pattern), and nothing else."""
_STARTS = frozenset('{["')
_scan: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The standard library's scanner (its C one when built): ``json.loads``' own default decoder
is configured the same (no hooks, strict strings)."""


def json_or_text(text: str) -> Any:
    """``text`` parsed when it is one JSON object, array or string (as ``json.loads`` parses it),
    else ``text`` itself; never raises."""
    start = 0
    if text[:1] not in _STARTS:
        stripped = text.lstrip(_WHITESPACE)
        if stripped[:1] not in _STARTS:
            return text
        start = len(text) - len(stripped)
    try:
        value, end = _scan(text, start)
    except (StopIteration, ValueError, RecursionError):
        return text
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return text
    return value

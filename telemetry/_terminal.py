"""What a command prints can never act on the terminal that shows it.

Trace values, tool names from an MCP server, a file name found in a folder: a command prints
text it did not write, and a terminal obeys what it reads. An escape sequence in a state key
could erase the report's lines on on-call's screen (CSI ``2K``), write the clipboard (OSC 52),
retitle the window or hide text behind a bidirectional override. :func:`safe` shows every such
character as a visible ``\\xNN`` or ``\\uNNNN`` escape instead; :func:`printing_safely` puts a
filter on ``sys.stdout`` and ``sys.stderr`` for the length of a command (``_command.run`` does
it for every subcommand), so no message, warning, table, CSV row or traceback is left out
because its writer forgot. Newlines and tabs pass: they are the layout, not an attack.

Why a filter and not only escaping at each print: the writers are many (reports, warnings,
errors naming a line's content, a target's own prints during the audit) and a new one added
later would be a new hole. What is escaped at the source (the forensics report's cells) passes
the filter unchanged, since its escapes are plain characters.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

__all__ = ["UNSAFE", "printing_safely", "safe"]

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
"""C0 controls but newline and tab (ESC, BEL, CR, backspace ...), DEL, C1 controls (a lone
``\\x9b`` is CSI and ``\\x9d`` OSC on terminals that take 8-bit controls), zero-width and
bidirectional formatting characters, line and paragraph separators, the byte-order mark."""


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with every :data:`UNSAFE` character shown as its escape; ``text`` itself when it has none."""
    return UNSAFE.sub(_shown, text)


class _Safe:
    """A text stream that passes :func:`safe` text to ``stream``; anything else (``fileno``,
    ``encoding``, ``isatty``, ``buffer``) is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(safe(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def printing_safely() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` filtered through :func:`safe` inside the block; the
    streams found on entry are put back on exit (a stream already filtered is not filtered twice)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = saved[0] if isinstance(saved[0], _Safe) else cast(TextIO, _Safe(saved[0]))
    sys.stderr = saved[1] if isinstance(saved[1], _Safe) else cast(TextIO, _Safe(saved[1]))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved

"""Checks that tell OTLP JSON lines from everything else, and say exactly where a file goes wrong.

The fast path never comes here line by line: DuckDB reads every file strictly, and only when it
refuses one does :func:`diagnose` walk that file in Python to name the line and the reason. The
one check that runs on every plain file is :func:`truncated_tail`, which reads only the bytes
after the last newline (a process killed mid-write leaves a partial last line there).
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Optional, cast

from ..exceptions import ForensicsInputError

EXPECTED = (
    "expected one OTLP TracesData JSON object per line ({\"resourceSpans\": [...]}), as written by "
    "outcome-telemetry's exporter or an OpenTelemetry Collector file exporter with format json"
)

_TAIL_CHUNK = 1 << 16


@dataclass(frozen=True)
class BadLine:
    """One line that is not an OTLP TracesData object: 1-based number and why."""

    number: int
    reason: str


@dataclass
class Diagnosis:
    """What :func:`diagnose` found in one file."""

    path: Path
    lines: int = 0
    good_lines: int = 0
    bad: list[BadLine] = field(default_factory=list)
    truncated_last: bool = False
    """The only problem at the end is a partial last line (no newline after it)."""

    @property
    def only_truncated(self) -> bool:
        return self.truncated_last and len(self.bad) == 1


def truncated_tail(path: Path) -> int:
    """Return how many bytes of a partial last line end ``path`` (0 when the file is complete).

    A last line without a newline that still parses as JSON is complete, not truncated.
    Compressed files return 0: their damage shows up when DuckDB reads them.
    """
    if path.name.lower().endswith((".gz", ".zst")):
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        tail = b""
        position = size
        while position > 0:
            step = min(_TAIL_CHUNK, position)
            position -= step
            handle.seek(position)
            tail = handle.read(step) + tail
            newline = tail.rfind(b"\n")
            if newline >= 0:
                tail = tail[newline + 1 :]
                break
    if not tail.strip():
        return 0
    try:
        json.loads(tail)
    except ValueError:
        return len(tail)
    return 0


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # the 16 magics 0x184D2A50..5F mark skippable frames


def zstd_truncated(path: Path) -> bool:
    """True when the zstd file ``path`` ends inside a frame (a copy or a writer cut short).

    DuckDB reads such a file without complaint and returns only the blocks it could decode,
    possibly none, so this walks the frame and block headers (RFC 8878) with seeks, never
    decompressing. Anything that is not zstd at all returns False: DuckDB refuses it itself.
    """
    size = path.stat().st_size
    with open(path, "rb") as handle:
        position = 0
        while position < size:
            handle.seek(position)
            head = handle.read(4)
            if len(head) < 4:
                return True
            magic = int.from_bytes(head, "little")
            if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
                skip = handle.read(4)
                if len(skip) < 4:
                    return True
                position += 8 + int.from_bytes(skip, "little")
                continue
            if magic != _ZSTD_MAGIC:
                return False
            descriptor = handle.read(1)
            if not descriptor:
                return True
            flags = descriptor[0]
            single_segment = bool(flags & 0x20)
            content_size = (1 if single_segment else 0, 2, 4, 8)[flags >> 6]
            header = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[flags & 0x03] + content_size
            position += header
            last = False
            while not last:
                handle.seek(position)
                block = handle.read(3)
                if len(block) < 3:
                    return True
                value = int.from_bytes(block, "little")
                last = bool(value & 1)
                kind, length = (value >> 1) & 0x03, value >> 3
                position += 3 + (1 if kind == 1 else length)
            position += 4 if flags & 0x04 else 0  # the content checksum
        return position > size


def copy_prefix(source: Path, target: Path, length: int) -> None:
    """Copy the first ``length`` bytes of ``source`` to ``target`` (dropping a partial tail)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        remaining = length
        while remaining > 0:
            chunk = src.read(min(remaining, 1 << 22))
            if not chunk:
                break
            dst.write(chunk)
            remaining -= len(chunk)


def _open_lines(path: Path) -> IO[bytes]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    if name.endswith(".zst"):
        zstd = shutil.which("zstd")
        if zstd is not None:  # the stdlib has no zstd before Python 3.14; the CLI is common
            process = subprocess.Popen([zstd, "-dcq", str(path)], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL)
            assert process.stdout is not None
            return process.stdout
        raise ForensicsInputError(
            f"{path}: DuckDB could not read this zstd file as OTLP JSON lines, and without the zstd "
            "command the bad line cannot be located; decompress it (zstd -d) and run again to see "
            "the line (note: a Collector file exporter with compression writes length-prefixed "
            "frames, not lines; configure it without compression)"
        )
    return open(path, "rb")


def _line_problem(raw: bytes) -> Optional[str]:
    """Why one non-empty line is not an OTLP TracesData object, or None when it is one."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        stripped = raw.strip()
        if stripped in (b"{", b"[", b"}", b"]", b"},", b"],") or stripped.startswith(b'"'):
            return (
                f"not a complete JSON object ({stripped[:40]!r}); this looks like pretty-printed "
                "JSON, for example the SDK's ConsoleSpanExporter output, which is not OTLP JSON lines"
            )
        return f"malformed JSON ({exc.msg} at column {exc.colno})"
    except ValueError as exc:  # e.g. bytes that are not UTF-8
        return f"not JSON text ({exc})"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    spans = value.get("resourceSpans")
    if isinstance(spans, list):
        for rs in spans:
            for ss in (rs or {}).get("scopeSpans") or []:
                for span in (ss or {}).get("spans") or []:
                    if not isinstance(span, dict) or not span.get("traceId") or not span.get("spanId"):
                        return "a span without traceId or spanId, which OTLP requires"
        return None
    for other, what in (("resourceMetrics", "OTLP metrics"), ("resourceLogs", "OTLP logs")):
        if other in value:
            return f"{what}, not traces"
    keys = ", ".join(sorted(value)[:5])
    return f"a JSON object without a \"resourceSpans\" array (keys: {keys})"


def _iter_lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes, bool]]:
    """Yield (number, line, ends_with_newline) for every line, numbering from 1."""
    number = 0
    for raw in handle:
        number += 1
        yield number, raw, raw.endswith(b"\n")


def diagnose(path: Path, keep: Optional[Path] = None) -> Diagnosis:
    """Walk ``path`` line by line and record every line that is not an OTLP TracesData object.

    With ``keep``, the good lines are written there, so the loader can read a repaired copy.
    This is the slow path, run only on a file DuckDB refused.
    """
    result = Diagnosis(path=path)
    sink = open(keep, "wb") if keep is not None else None
    try:
        with _open_lines(path) as handle:
            last_had_newline = True
            last_bad_number = 0
            try:
                for number, raw, newline in _iter_lines(handle):
                    last_had_newline = newline
                    if not raw.strip():
                        continue
                    result.lines = number
                    problem = _line_problem(raw)
                    if problem is None:
                        result.good_lines += 1
                        if sink is not None:
                            sink.write(raw if newline else raw + b"\n")
                    else:
                        result.bad.append(BadLine(number, problem))
                        last_bad_number = number
            except gzip.BadGzipFile as exc:  # not gzip, or corrupt: not a truncation
                result.bad.append(BadLine(result.lines + 1, f"not a valid gzip stream ({exc}); "
                                                            "check the file's name and compression"))
                return result
            except (EOFError, OSError) as exc:  # a compressed stream cut short
                result.bad.append(BadLine(result.lines + 1, f"compressed stream ends early ({exc})"))
                result.truncated_last = True
                return result
            if result.bad and last_bad_number == result.lines and not last_had_newline:
                result.truncated_last = True
    finally:
        if sink is not None:
            sink.close()
    return result


def describe(diagnosis: Diagnosis, limit: int = 3) -> str:
    """A one-paragraph error for a refused file: where, what, and what was expected."""
    shown = "; ".join(f"line {b.number}: {b.reason}" for b in diagnosis.bad[:limit])
    more = f" (and {len(diagnosis.bad) - limit} more bad lines)" if len(diagnosis.bad) > limit else ""
    return f"{diagnosis.path}: {shown}{more}; {EXPECTED}"

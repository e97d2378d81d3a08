"""Checks that tell OTLP JSON lines from everything else, and say exactly where a file goes wrong.

The fast path never comes here line by line: DuckDB reads every file strictly, and only when it
refuses one does :func:`diagnose` walk that file in Python to name the line and the reason. The
one check that runs on every plain file is :func:`truncated_tail`, which reads only the bytes
after the last newline (a process killed mid-write leaves a partial last line there).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from .. import conventions as c
from ..exceptions import ForensicsInputError

__all__ = [
    "BadLine",
    "Diagnosis",
    "EXPECTED",
    "copy_prefix",
    "describe",
    "diagnose",
    "line_problem",
    "out_of_memory",
    "refusal_hint",
    "truncated_tail",
    "zstd_truncated",
]

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


def truncated_tail(path: Path, size: int | None = None) -> int:
    """Return how many bytes of a partial last line end ``path`` (0 when the file is complete).

    ``size`` is the file's length as the caller saw it (one size per file for a whole load, so a
    file still being written is judged as it was); by default the current size. A last line
    without a newline that still parses as JSON is complete, not truncated. Compressed files
    return 0: their damage shows up when DuckDB reads them.
    """
    if path.name.lower().endswith((".gz", ".zst")):
        return 0
    if size is None:
        size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        chunks: list[bytes] = []  # newest last; joined once (prepending each chunk is quadratic)
        position = size
        while position > 0:
            step = min(_TAIL_CHUNK, position)
            position -= step
            handle.seek(position)
            chunk = handle.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                chunks.append(chunk[newline + 1 :])
                break
            chunks.append(chunk)
        tail = b"".join(reversed(chunks))
    if not tail.strip():
        return 0
    try:
        json.loads(tail)
    except (ValueError, RecursionError):
        # Bare carriage returns inside it: lines ended with CR alone (no LF ever comes), not a
        # write cut short; left to the reader, which refuses it and names why (line_problem).
        return 0 if _cr_line_ends(tail) else len(tail)
    return 0


def _cr_line_ends(raw: bytes) -> bool:
    """A carriage return inside the line (JSON text holds none outside its whitespace): lines
    separated by CR alone, as classic Mac OS wrote them, read as one line."""
    return b"\r" in raw.rstrip(b"\r\n")


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
    with _Prefix(source, length) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 22)


def _open_lines(path: Path, size: int | None = None) -> IO[bytes]:
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
    if size is not None:  # only the bytes the load began with
        return io.BufferedReader(_Prefix(path, size), 1 << 20)
    return open(path, "rb")


class _Prefix(io.RawIOBase):
    """The first ``size`` bytes of a file that may be growing, read in chunks."""

    def __init__(self, path: Path, size: int):
        self._handle = open(path, "rb")
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)[: max(0, self._left)]
        count = self._handle.readinto(view) if len(view) else 0
        self._left -= count
        return count

    def close(self) -> None:
        self._handle.close()
        super().close()


_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
_SPAN_ID = re.compile(r"[0-9a-fA-F]{16}")
_DIGITS = re.compile(r"[0-9]+")
_TIME_LIMIT = c.INT64_MAX
"""Times end below 2^63 - 1, which a TIMESTAMP_NS keeps for infinity (``otlp_time_ok``)."""


def _is_time(value: object) -> bool:
    """An OTLP time: a decimal integer, as a JSON number or a string, in [0, 2^63 - 1)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value < _TIME_LIMIT
    return isinstance(value, str) and _DIGITS.fullmatch(value) is not None and int(value) < _TIME_LIMIT


def _wrong(value: object, kind: type) -> bool:
    """Present and not of ``kind`` (JSON null counts as absent, as in the SQL)."""
    return value is not None and not isinstance(value, kind)


_SCALARS = ("stringValue", "boolValue", "intValue", "doubleValue", "bytesValue", "kvlistValue")


def _attributes_problem(attributes: object, where: str) -> str | None:
    if _wrong(attributes, list):
        return f'{where} "attributes" is not a list'
    bad = f'{where} attribute is not {{"key": ..., "value": {{...}}}} with a value'
    for attribute in attributes or []:  # type: ignore[attr-defined]
        if not isinstance(attribute, dict) or attribute.get("key") is None or not isinstance(attribute.get("value"), dict):
            return bad
        value = attribute["value"]
        array = value.get("arrayValue")
        if array is not None and not isinstance(array, dict):
            return bad  # an arrayValue that is not an object, even beside a scalar: nothing reads from it
        if array is None and all(value.get(k) is None for k in _SCALARS):
            return bad  # empty: nothing would read
        if isinstance(array, dict) and any(not isinstance(v, dict) for v in _listed(array.get("values"))):
            return bad
    return None


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _span_problem(span: object) -> str | None:
    """Why one element of ``spans`` is not an OTLP span (the rules ``queries/spans.sql`` applies)."""
    if not isinstance(span, dict):
        return 'an element of "spans" is not an object'
    if not isinstance(span.get("traceId"), str) or not _TRACE_ID.fullmatch(span["traceId"]):
        return f"a span's traceId is not 32 hex characters ({span.get('traceId')!r})"
    if not isinstance(span.get("spanId"), str) or not _SPAN_ID.fullmatch(span["spanId"]):
        return f"a span's spanId is not 16 hex characters ({span.get('spanId')!r})"
    parent = span.get("parentSpanId")
    if parent not in (None, "") and not (isinstance(parent, str) and _SPAN_ID.fullmatch(parent)):
        return f"a span's parentSpanId is not empty or 16 hex characters ({parent!r})"
    start, end = span.get("startTimeUnixNano"), span.get("endTimeUnixNano")
    if not _is_time(start) or not _is_time(end):
        return (f"a span's startTimeUnixNano or endTimeUnixNano is not an integer in [0, 2^63 - 1) "
                f"({start!r}, {end!r})")
    if int(end) < int(start):  # type: ignore[arg-type]
        return f"a span ends before it starts ({start!r} > {end!r})"
    return _attributes_problem(span.get("attributes"), "a span")


def _structure_problem(resource_spans: list[object]) -> str | None:
    """The first OTLP structure rule a TracesData's ``resourceSpans`` breaks, or None."""
    for rs in resource_spans:
        if not isinstance(rs, dict):
            return 'an element of "resourceSpans" is not an object'
        if _wrong(rs.get("scopeSpans"), list):
            return '"scopeSpans" is not a list'
        resource = rs.get("resource")
        if _wrong(resource, dict):
            return '"resource" is not an object'
        problem = _attributes_problem((resource or {}).get("attributes"), "a resource")
        if problem:
            return problem
        for ss in rs.get("scopeSpans") or []:
            if not isinstance(ss, dict):
                return 'an element of "scopeSpans" is not an object'
            if _wrong(ss.get("spans"), list):
                return '"spans" is not a list'
            if _wrong(ss.get("scope"), dict):
                return '"scope" is not an object'
            for span in ss.get("spans") or []:
                problem = _span_problem(span)
                if problem:
                    return problem
    return None


def line_problem(raw: bytes, max_line_bytes: int | None = None) -> str | None:
    """Why one non-empty line is not an OTLP TracesData object, or None when it is one."""
    if max_line_bytes is not None and len(raw.rstrip(b"\r\n")) > max_line_bytes:
        return (f"the line is {len(raw):,} bytes, longer than --max-line-bytes ({max_line_bytes:,}); "
                "pass a larger --max-line-bytes to read it")
    nul = raw.find(b"\0")
    if nul >= 0:  # JSON text never holds a NUL byte; json would name it a UTF-16/32 decode error
        return (f"{raw.count(0):,} NUL byte(s) from byte {nul + 1:,} of the line: a block of zeros, as a crash "
                "or a full disk leaves where a write never landed; what that line held is lost")
    try:
        value = json.loads(raw)
    except RecursionError:
        return "JSON nested too deeply to read (thousands of levels); this is not an OTLP TracesData object"
    except json.JSONDecodeError as exc:
        if _cr_line_ends(raw):
            return ("lines end with a carriage return alone (CR, no LF), so the reader sees one long line; "
                    "convert the line ends to LF (e.g. `tr '\\r' '\\n' < FILE > FILE.jsonl`) and read that")
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
        return _structure_problem(spans)
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


def diagnose(path: Path, keep: Path | None = None, *, max_line_bytes: int | None = None,
             size: int | None = None) -> Diagnosis:
    """Walk ``path`` line by line and record every line that is not an OTLP TracesData object.

    With ``keep``, the good lines are written there, so the loader can read a repaired copy.
    ``size`` limits a plain file to the length the load began with (a file still being written).
    This is the slow path, run only on a file DuckDB refused.
    """
    result = Diagnosis(path=path)
    sink = open(keep, "wb") if keep is not None else None
    try:
        with _open_lines(path, size) as handle:
            last_had_newline = True
            last_bad_number = 0
            last_cr_only = False
            try:
                for number, raw, newline in _iter_lines(handle):
                    last_had_newline = newline
                    if not raw.strip():
                        continue
                    result.lines = number
                    problem = line_problem(raw, max_line_bytes)
                    if problem is None:
                        result.good_lines += 1
                        if sink is not None:
                            sink.write(raw if newline else raw + b"\n")
                    else:
                        result.bad.append(BadLine(number, problem))
                        last_bad_number = number
                        last_cr_only = _cr_line_ends(raw)
            except (gzip.BadGzipFile, zlib.error) as exc:  # not gzip, or corrupt: not a truncation
                result.bad.append(BadLine(result.lines + 1, f"not a valid gzip stream ({exc}); "
                                                            "check the file's name and compression"))
                return result
            except (EOFError, OSError) as exc:  # a compressed stream cut short
                result.bad.append(BadLine(result.lines + 1, f"compressed stream ends early ({exc})"))
                result.truncated_last = True
                return result
            if result.bad and last_bad_number == result.lines and not last_had_newline and not last_cr_only:
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


def refusal_hint(diagnosis: Diagnosis, skip_bad_lines: bool) -> str:
    """What to do about a file refused for its bad lines, to append to :func:`describe`."""
    if diagnosis.good_lines:
        return " (pass --skip-bad-lines to read the rest)"
    if skip_bad_lines:
        return (" (--skip-bad-lines reads a file's good lines and skips its bad ones, and this file has no good "
                "line at all, so it is refused rather than read as empty: leave it out of the paths)")
    return ""


def out_of_memory(error: Exception, max_line_bytes: int, memory_limit: str, default_line_bytes: int,
                  factor: int = 20) -> ForensicsInputError:
    """DuckDB's out-of-memory error while reading JSON lines, as a named input error saying the
    memory limit that reads such lines (``factor`` times the longest) and the way to skip them."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    needed = -(-factor * max_line_bytes // 2**30)  # whole GiB, rounded up
    if max_line_bytes > default_line_bytes:
        return ForensicsInputError(
            f"lines of up to --max-line-bytes {max_line_bytes:,} bytes do not fit the reader's memory limit "
            f"({memory_limit}; parsing a line takes up to about {factor} times its length): DuckDB {first}. To "
            f"read them, pass --memory-limit {needed}G (this host needs that much free memory); or lower "
            f"--max-line-bytes (the default, {default_line_bytes:,}, fits the default limit) and pass "
            "--skip-bad-lines to read the other lines (each longer one is named as skipped), or shorten the "
            "values at their source")
    return ForensicsInputError(
        f"the traces do not fit the reader's memory limit ({memory_limit}): DuckDB {first}; pass a larger "
        f"--memory-limit (at least {needed}G for lines of --max-line-bytes {max_line_bytes:,}), read fewer "
        "files at once, or lower --max-line-bytes")


"""A span exporter that writes OTLP JSON lines files, one file per process.

Each line is a complete ``TracesData`` object of at most ``OTLP_SPANS_PER_LINE`` spans, so a
reader can stream the file line by line and a crash loses at most the line being written (the
forensics loader skips a truncated last line with a warning). The file name carries the service,
the pid and the start time, so processes sharing a directory never interleave.

What survives what (docs/deployment.md, "What survives what", says it for operators):

- **A failed write** (full disk, an I/O error) is logged once, counted in ``dropped_spans`` and
  in the internal-errors counter, and reported as a failed export (which the processor counts as
  dropped spans, reason ``export_failed``); it is never raised. The bytes it did write are cut
  off again, so the file holds whole lines only; if they cannot be cut, the next write starts
  with a newline, so a later line is never glued to a partial one.
- **A fork**: the child re-creates the lock (a parent thread may have held it while writing),
  drops the parent's descriptor without writing to it, and opens a file of its own at its first
  export (``os.register_at_fork``).
- **The file or its folder removed** while the process runs: the next export notices that the
  name no longer leads to the open file and starts a new file (the folder made again), rather
  than writing into a file nobody can open.

Each export is written to the operating system with ``os.write`` (no buffer in the process)
before it returns, so a process killed outright loses only what was still queued.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import conventions as c
from ..exceptions import ConfigurationError
from . import _containment as _safe
from ._fork import renew_after_fork
from ._otlp_text import encode_line

if TYPE_CHECKING:
    from ._metrics import ToolMetrics

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def trace_file_name(service_name: str, pid: int, started_ns: int) -> str:
    """The file name for one process: ``{service}-{pid}-{UTC start}.jsonl``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started_ns / 1e9))
    safe = _UNSAFE.sub("_", service_name).strip("_") or "service"
    return f"{safe}-{pid}-{stamp}-{started_ns % 1_000_000_000:09d}.jsonl"


def _write_all(fd: int, data: bytes) -> int:
    """Write ``data`` to ``fd`` whole (``os.write`` may write less); the bytes written."""
    view = memoryview(data)
    done = 0
    while done < len(data):
        done += os.write(fd, view[done:])
    return done


class JsonLinesSpanExporter(SpanExporter):
    """Append spans to ``directory/{service}-{pid}-{start}.jsonl`` as OTLP JSON lines.

    The file is opened lazily on the first export, and a forked child opens its own (see the
    module docstring), so a forked worker never writes into its parent's file.
    """

    def __init__(self, directory: str | os.PathLike[str], service_name: str) -> None:
        self.directory = Path(directory)
        self.service_name = service_name
        self.dropped_spans = 0
        self.exported_spans = 0
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = -1
        self._path: Path | None = None
        self._torn = False
        """The last failed write left a partial line that could not be cut off."""
        self._shutdown = False
        self.metrics: ToolMetrics | None = None
        """Where contained failures are counted (set by ``configure()``; else the active runtime's)."""
        renew_after_fork(self)

    def _after_fork(self) -> None:
        """In a forked child: a lock of its own (the parent's may have been held by a thread that
        is not in the child) and no file until its first export (the parent's is the parent's)."""
        self._lock = threading.Lock()
        fd, self._fd, self._path, self._pid, self._torn = self._fd, None, None, -1, False
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def check_writable(self) -> None:
        """Create the folder and prove a file can be written there; :class:`ConfigurationError` if not."""
        probe = self.directory / f".outcome-telemetry-probe-{os.getpid()}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(probe, "w", encoding="utf-8") as handle:
                handle.write("")
            probe.unlink()
        except OSError as exc:
            raise ConfigurationError(
                f"traces_dir={str(self.directory)!r} cannot be written ({exc.strerror or exc}); pass a folder "
                f"this process may create files in, or traces_dir=None to turn span files off"
            ) from exc

    @property
    def path(self) -> Path | None:
        """The file this process writes to, once the first span was exported."""
        return self._path

    def _still_there(self, fd: int, path: Path) -> bool:
        """True while ``path`` names the open file (not removed, not replaced)."""
        try:
            named = os.stat(path)
        except OSError:
            return False
        held = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def _open(self) -> int:
        pid = os.getpid()
        if self._fd is not None and self._pid == pid:
            if self._path is not None and self._still_there(self._fd, self._path):
                return self._fd
            os.close(self._fd)  # removed or replaced under us: what follows goes to a new file
            self._fd, self._torn = None, False
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / trace_file_name(self.service_name, pid, time.time_ns())
        self._fd = os.open(path, _FLAGS, 0o644)
        self._pid = pid
        self._path = path
        return self._fd

    def _append(self, data: bytes) -> None:
        """Append ``data`` (whole lines) or nothing: what a failed write left is cut off again
        (or, if it cannot be, the next append starts on a fresh line), and the failure re-raised."""
        fd = self._open()
        start = os.fstat(fd).st_size
        try:
            _write_all(fd, b"\n" + data if self._torn else data)
        except BaseException:  # a full disk, an I/O error, or an interrupt between two writes
            try:
                if os.fstat(fd).st_size > start:
                    os.ftruncate(fd, start)
            except OSError:
                self._torn = True
            raise
        self._torn = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            per_line = c.OTLP_SPANS_PER_LINE
            text = "".join(encode_line(spans[i : i + per_line]) + "\n" for i in range(0, len(spans), per_line))
            with self._lock:
                self._append(text.encode("utf-8"))
        except Exception as exc:  # the exporter boundary never raises into the application
            self.dropped_spans += len(spans)
            _safe.report(c.STAGE_EXPORTER, f"writing spans to {self.directory}", exc, self.metrics)
            return SpanExportResult.FAILURE
        self.exported_spans += len(spans)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                try:
                    os.fsync(self._fd)
                except Exception as exc:
                    _safe.report(c.STAGE_EXPORTER, f"flushing {self._path}", exc, self.metrics)
                    return False
        return True

    def shutdown(self) -> None:
        self.force_flush()
        with self._lock:
            self._shutdown = True
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except Exception as exc:
                    _safe.report(c.STAGE_EXPORTER, f"closing {self._path}", exc, self.metrics)
                self._fd = None

"""A span exporter that writes OTLP JSON lines files, one file per process.

Each line is a complete ``TracesData`` object of at most ``OTLP_SPANS_PER_LINE`` spans, so a
reader can stream the file line by line and a crash loses at most the line being written (the
forensics loader skips a truncated last line with a warning). The file name carries the service,
the pid and the start time, so processes sharing a directory never interleave.

A failing write (read-only directory, full disk) is logged once, counted in ``dropped_spans``
and in the internal-errors counter, and reported as a failed export (which the processor counts
as dropped spans); it is never raised. Each export is written and flushed to the operating
system before it returns, so a process killed outright loses only what was still queued.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import containment as _safe
from .. import conventions as c
from ..exceptions import ConfigurationError
from .otlp_text import encode_line

if TYPE_CHECKING:
    from .metrics import ToolMetrics

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def trace_file_name(service_name: str, pid: int, started_ns: int) -> str:
    """The file name for one process: ``{service}-{pid}-{UTC start}.jsonl``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started_ns / 1e9))
    safe = _UNSAFE.sub("_", service_name).strip("_") or "service"
    return f"{safe}-{pid}-{stamp}-{started_ns % 1_000_000_000:09d}.jsonl"


class JsonLinesSpanExporter(SpanExporter):
    """Append spans to ``directory/{service}-{pid}-{start}.jsonl`` as OTLP JSON lines.

    The file is opened lazily on the first export, and reopened under a new name if the
    process forked (the pid changed), so a forked worker never writes into its parent's file.
    """

    def __init__(self, directory: str | os.PathLike[str], service_name: str) -> None:
        self.directory = Path(directory)
        self.service_name = service_name
        self.dropped_spans = 0
        self.exported_spans = 0
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._pid = -1
        self._path: Path | None = None
        self._shutdown = False
        self.metrics: ToolMetrics | None = None
        """Where contained failures are counted (set by ``configure()``; else the active runtime's)."""

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

    def _open(self) -> IO[str]:
        pid = os.getpid()
        if self._file is not None and self._pid == pid:
            return self._file
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / trace_file_name(self.service_name, pid, time.time_ns())
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open on purpose
        self._pid = pid
        self._path = path
        return self._file

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            per_line = c.OTLP_SPANS_PER_LINE
            text = "".join(encode_line(spans[i : i + per_line]) + "\n" for i in range(0, len(spans), per_line))
            with self._lock:
                handle = self._open()
                handle.write(text)
                handle.flush()
        except Exception as exc:  # the exporter boundary never raises into the application
            self.dropped_spans += len(spans)
            _safe.report(c.STAGE_EXPORTER, f"writing spans to {self.directory}", exc, self.metrics)
            return SpanExportResult.FAILURE
        self.exported_spans += len(spans)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except Exception as exc:
                    _safe.report(c.STAGE_EXPORTER, f"flushing {self._path}", exc, self.metrics)
                    return False
        return True

    def shutdown(self) -> None:
        self.force_flush()
        with self._lock:
            self._shutdown = True
            if self._file is not None:
                try:
                    self._file.close()
                except Exception as exc:
                    _safe.report(c.STAGE_EXPORTER, f"closing {self._path}", exc, self.metrics)
                self._file = None

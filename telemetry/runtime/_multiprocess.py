"""Metrics from many worker processes as one ``/metrics``: prometheus-client's multiprocess mode.

Under gunicorn, uvicorn workers or Celery prefork, each worker counts its own tool calls. In
multiprocess mode prometheus-client keeps every worker's values in memory-mapped files in one
folder (``PROMETHEUS_MULTIPROC_DIR``, one file per metric type and process id), and a
``MultiProcessCollector`` sums them when scraped, so any worker's ``/metrics`` (or
``outcome-telemetry metrics-serve DIR``) shows the whole application. A worker that dies keeps
its file, so its counts stay in the sums after the master respawns it.

What changes in this mode, from prometheus-client's design:

- counters and histograms are summed across processes, dead ones included; the toolkit has no
  gauges, so :func:`mark_process_dead` (which only drops live gauges) is bookkeeping, kept so a
  server hook can call it as the library asks;
- exemplars are not kept (prometheus-client stores none in its files): a tool call's
  ``trace_id`` is then found from the span, not from the counter;
- the folder must be empty when the application starts (:func:`clear`, from gunicorn's
  ``on_starting``), or the previous run's counts are summed in;
- the mode is chosen for the whole process before any metric exists: the variable is read when
  prometheus-client is imported, and ``configure(multiprocess_dir=...)`` switches the value
  class itself for metrics created after it, which is every one the toolkit creates.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, values
from prometheus_client import multiprocess as _prometheus_multiprocess

from ..exceptions import ConfigurationError

__all__ = ["ENV_VAR", "aggregate_registry", "child_exit", "clear", "enable", "mark_process_dead", "resolve"]

ENV_VAR = "PROMETHEUS_MULTIPROC_DIR"


def resolve(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The multiprocess folder: ``explicit``, else ``$PROMETHEUS_MULTIPROC_DIR``, else None
    (single-process). Raises :class:`ConfigurationError` for a folder that is missing or not
    writable, or for an explicit folder that contradicts the variable."""
    named = os.environ.get(ENV_VAR)
    if explicit is None and not named:
        return None
    try:
        folder = Path(os.fspath(explicit if explicit is not None else named))  # type: ignore[arg-type]
    except TypeError:
        raise ConfigurationError(f"multiprocess_dir must be a folder path, got {type(explicit).__name__}") from None
    if explicit is not None and named and Path(named).resolve() != folder.resolve():
        raise ConfigurationError(
            f"multiprocess_dir={str(folder)!r} but {ENV_VAR}={named!r}: every worker must write to one folder; "
            f"pass the same folder or drop one of them"
        )
    if not folder.is_dir():
        raise ConfigurationError(f"the multiprocess metrics folder {folder} does not exist; create it (empty) before the workers start")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigurationError(f"the multiprocess metrics folder {folder} is not writable by this process")
    return folder


def enable(folder: Path) -> None:
    """Make every metric created from now on in this process write to ``folder``'s files."""
    os.environ[ENV_VAR] = str(folder)
    if not getattr(values.ValueClass, "_multiprocess", False):
        values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]


def aggregate_registry(folder: str | os.PathLike[str]) -> CollectorRegistry:
    """A registry whose only collector sums every process's files in ``folder`` (serve this one)."""
    registry = CollectorRegistry()
    _prometheus_multiprocess.MultiProcessCollector(registry, path=str(folder))  # type: ignore[no-untyped-call]
    return registry


def mark_process_dead(pid: int, folder: str | os.PathLike[str] | None = None) -> None:
    """Tell prometheus-client that worker ``pid`` exited (its counters stay in the sums)."""
    _prometheus_multiprocess.mark_process_dead(pid, str(folder) if folder is not None else None)  # type: ignore[no-untyped-call]


def child_exit(server: Any, worker: Any) -> None:
    """A gunicorn ``child_exit`` hook: ``from telemetry.runtime._multiprocess import child_exit``
    in ``gunicorn.conf.py``."""
    mark_process_dead(worker.pid)


def clear(folder: str | os.PathLike[str]) -> int:
    """Delete the previous run's ``*.db`` files in ``folder`` (call it before workers start,
    e.g. from gunicorn's ``on_starting``); returns how many were removed."""
    removed = 0
    for path in Path(folder).glob("*.db"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed

"""Locate the data files the package ships: SQL queries, Grafana dashboards, alert rules.

In a wheel they live inside the package (``telemetry/_data/<kind>``, copied there at build
time); in a source checkout or an editable install they are the repository's top-level
``queries/``, ``dashboards/`` and ``alerts/`` folders. Everything that needs one of those files
asks :func:`data_dir`, so no other module knows where they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..exceptions import ConfigurationError

__all__ = ["DataKind", "data_dir", "data_file"]

DataKind = Literal["queries", "dashboards", "alerts"]

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
"""The ``telemetry`` package folder (this module lives in ``telemetry/runtime/``)."""


def data_dir(kind: DataKind) -> Path:
    """Return the folder holding the shipped files of ``kind``.

    Raises :class:`ConfigurationError` when neither the installed copy nor the source checkout
    has it, which means a broken install.
    """
    for candidate in (_PACKAGE_DIR / "_data" / kind, _PACKAGE_DIR.parent / kind):
        if candidate.is_dir():
            return candidate
    raise ConfigurationError(
        f"the package's {kind!r} files are missing (looked in {_PACKAGE_DIR / '_data' / kind} "
        f"and {_PACKAGE_DIR.parent / kind}); reinstall outcome-telemetry"
    )


def data_file(kind: DataKind, name: str) -> Path:
    """Return one shipped file, e.g. ``data_file("queries", "spans.sql")``."""
    path = data_dir(kind) / name
    if not path.is_file():
        raise ConfigurationError(f"no shipped file {name!r} in {data_dir(kind)}")
    return path

"""Shared fixtures for the forensics tests: one chDB engine per test process (chDB allows one path)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from types import ModuleType

import pytest


_DATABASES = itertools.count()


def require(module: str, extra: str) -> ModuleType:
    """Import ``module``; in CI a missing one fails the test, elsewhere it skips saying what to install."""
    if os.environ.get("CI") == "true":
        return __import__(module)
    return pytest.importorskip(module, reason=f"install outcome-telemetry[{extra}] (or [dev]) to run this test")


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one chDB data directory of this test process."""
    require("chdb", "chdb")
    require("clickhouse_connect", "clickhouse")
    return tmp_path_factory.mktemp("chdb") / "engine"


@pytest.fixture
def database() -> str:
    """A fresh database name for one test (tables of different tests never meet)."""
    return f"otel_{os.getpid()}_{next(_DATABASES)}"

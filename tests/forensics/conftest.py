"""Shared fixtures for the forensics tests: one chDB engine per test process (chDB allows one path),
and a loader connection for the property tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from telemetry.forensics._inputs import resolve_inputs
from telemetry.forensics._loading import SPANS_LOADED, load

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


@pytest.fixture(scope="module")
def load_file() -> Iterator[Callable[[Path], duckdb.DuckDBPyConnection]]:
    """Load one trace file with the loader ``open_traces`` runs (``loading.load``: the macros, the
    JSON-lines reader with its refusals, deduplication and the ``spans`` view) into a DuckDB
    connection shared by the module's tests, and return the connection.

    For tests of the loader's contract (its property tests, with a hundred-odd examples, and the
    spec's encoding quirks) that look only at what was loaded or refused: they skip a new
    connection, the memory settings and the evidence per load. Each load first drops what the
    previous one loaded, so a test can never read an earlier one's spans (a load that made
    nothing fails the query instead)."""
    con = duckdb.connect(":memory:")

    def load_one(path: Path) -> duckdb.DuckDBPyConnection:
        con.execute(f"DROP TABLE IF EXISTS {SPANS_LOADED}").fetchall()
        load(con, resolve_inputs([path]))
        return con

    yield load_one
    con.close()

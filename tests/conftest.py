"""Session fixtures shared by every test folder: a real PostgreSQL server, and ``store_url``,
which runs a guard test once on SQLite and once on PostgreSQL.

The server is Debian's ``postgresql`` started for this session (see ``tests/pg_server.py``).
Without PostgreSQL on the machine the PostgreSQL half is skipped with a message saying what to
install, except in CI (``CI=true``), where a missing server fails the run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Property tests check what a boundary does with any input, never how fast: on a shared 2-core
# machine a PostgreSQL round trip can take longer than Hypothesis's default 200 ms deadline, which
# would fail a correct run at random. Speed is measured in benchmarks/.
settings.register_profile("outcome-telemetry", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("outcome-telemetry")

# promtool and the Prometheus server are Go programs that the suite starts dozens of times; Go's
# default collector (GOGC=100) spends a good share of promtool's CPU here. Collecting at 400%
# growth instead costs some memory per process and changes nothing they compute.
os.environ.setdefault("GOGC", "400")

from xdist_reports import pytest_runtest_makereport  # noqa: E402,F401  (a hook: pytest finds it here)

import pg_server  # noqa: E402

BACKENDS = ("sqlite", "postgresql")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a PostgreSQL server for this session (started here unless OUTCOME_TELEMETRY_PG_DSN names one)."""
    named = os.environ.get("OUTCOME_TELEMETRY_PG_DSN")
    if named:
        yield named
        return
    try:
        server = pg_server.start_server()
    except pg_server.NoPostgres as exc:
        if _in_ci():
            pytest.fail(f"CI needs PostgreSQL for the guard tests: {exc}")
        pytest.skip(str(exc))
    try:
        yield server.dsn
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty guard store, as the string ``telemetry.guards.open_store`` takes: a SQLite
    file path, then a PostgreSQL URL (an empty schema on the session's server)."""
    if request.param == "sqlite":
        yield str(tmp_path / "guards.db")
        return
    yield pg_server.fresh_postgres_url(request.getfixturevalue("postgres_dsn"))
    from telemetry.guards import PostgresStore

    for store in PostgresStore.open_stores():
        store.close()

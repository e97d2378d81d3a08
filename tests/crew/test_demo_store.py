"""``outcome-telemetry demo --store postgresql://...``: the crew runs its guards on a real
PostgreSQL server, forensics finds exactly what was injected, and a bad or unreachable URL is
a usage error before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from telemetry.cli import main  # noqa: E402

import pg_server  # noqa: E402


@pytest.mark.slow
def test_the_crew_runs_on_postgresql(postgres_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two scenarios in both modes on PostgreSQL: precision and recall 1, the rows in the demo's schemas, no SQLite file."""
    out = tmp_path / "out"
    status = main(["demo", "--store", postgres_dsn, "--out", str(out), "--no-alerts",
                   "--scenario", "split_brain", "--scenario", "retry_after_timeout"])
    text = capsys.readouterr().out
    assert status == 0, text
    assert "precision 1.00, recall 1.00" in text
    assert not list(out.glob("*.sqlite"))
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT count(*) FROM outcome_telemetry_demo_guarded.guard_changes"
        ).fetchone()
        charges = conn.execute("SELECT count(*) FROM outcome_telemetry_demo_legacy.legacy_charges").fetchone()
    assert rows is not None and rows[0] > 0
    assert charges is not None and charges[0] == 2  # the legacy retry charged twice


@pytest.mark.parametrize("store", ["crew.db", "mysql://x@y/z"])
def test_a_store_that_is_not_a_postgresql_url_exits_2(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--store takes a postgresql:// URL only; anything else is refused, nothing written."""
    assert main(["demo", "--store", store, "--out", str(tmp_path / "out"), "--no-alerts"]) == 2
    assert "postgresql://" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_unreachable_server_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listens at the URL: exit 2 with a message naming the server, never its password."""
    url = f"postgresql://crew:hunter2@127.0.0.1:{pg_server.free_port()}/crew?connect_timeout=1"
    assert main(["demo", "--store", url, "--out", str(tmp_path / "out"), "--no-alerts",
                 "--scenario", "split_brain"]) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1" in err and "hunter2" not in err

"""A missing optional part is a named error that says which extra to install, and how."""

from __future__ import annotations

import sys

import pytest

from telemetry.audit.cli import main as audit


def test_audit_without_the_mcp_sdk_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """With the SDK missing (``None`` in ``sys.modules`` makes its import fail), the command exits 2
    naming what needs it and the one install command that works from a checkout."""
    monkeypatch.setitem(sys.modules, "mcp", None)
    code = audit(["--mcp-stdio", "python -c pass"])
    err = capsys.readouterr().err
    assert code == 2
    assert "auditing MCP targets needs mcp; install it with: pip install -e '/path/to/outcome-telemetry[mcp]'" in err
    assert "Traceback" not in err


def test_clickhouse_without_its_client_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same advice, as the named error forensics raises, before anything is connected to."""
    from telemetry.exceptions import ClickHouseInputError
    from telemetry.forensics import open_clickhouse

    monkeypatch.setitem(sys.modules, "clickhouse_connect", None)
    with pytest.raises(ClickHouseInputError, match=r"reading from ClickHouse needs clickhouse_connect; install it "
                                                   r"with: pip install -e '/path/to/outcome-telemetry\[clickhouse\]'"):
        open_clickhouse("http://127.0.0.1:9/otel")


def test_postgres_store_without_psycopg_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from telemetry.exceptions import ConfigurationError
    from telemetry.guards import PostgresStore

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"PostgresStore needs psycopg; install it with: "
                                                 r"pip install -e '/path/to/outcome-telemetry\[postgres\]'"):
        PostgresStore("postgresql://crew@127.0.0.1:9/crew")

"""A missing optional part is a named error that says which extra to install, and how."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from telemetry.audit._cli import main as audit


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


@pytest.mark.parametrize(("protocol", "module", "extra"), [
    ("grpc", "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "otlp-grpc"),
    (None, "opentelemetry.exporter.otlp.proto.http.trace_exporter", "otlp"),
])
def test_otlp_export_without_its_exporter_names_the_extra(protocol: str | None, module: str, extra: str,
                                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """configure(otlp_endpoint=...) without the exporter installed: a ConfigurationError naming its
    extra, before anything is set up (the default protocol, http/protobuf, needs only [otlp])."""
    import telemetry
    from telemetry.exceptions import ConfigurationError

    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigurationError, match=rf"install it with: pip install -e '/path/to/outcome-telemetry\[{extra}\]'"):
        telemetry.configure(otlp_endpoint="http://127.0.0.1:1", otlp_protocol=protocol, traces_dir=tmp_path,
                            install_global=False)
    assert telemetry.active_runtime() is None


def test_otlp_variables_without_the_exporter_warn_and_keep_the_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Only the OTEL_EXPORTER_OTLP_* variables ask for OTLP: a warning naming the extra, and the
    runtime still writes its trace files (the variables are lenient, as the SDK treats them)."""
    import telemetry

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    with telemetry.configure(traces_dir=tmp_path, install_global=False) as runtime:
        assert runtime.traces_dir is not None
    assert "[otlp]" in caplog.text and "trace files only" in caplog.text


def test_forensics_without_duckdb_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import telemetry.forensics` without DuckDB: the ImportError names [forensics]."""
    import importlib

    for name in [m for m in sys.modules if m == "telemetry.forensics" or m.startswith("telemetry.forensics.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(ImportError, match=r"outcome-telemetry\[forensics\]"):
        importlib.import_module("telemetry.forensics")


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("telemetry.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("telemetry.integrations.langchain", "langchain_core", "langchain"),
    ("telemetry.integrations.openai_agents", "agents", "openai-agents"),
    ("telemetry.integrations.llama_index", "llama_index.core", "llama-index"),
    ("telemetry.integrations.agno", "agno", "agno"),
    ("telemetry.integrations.google_adk", "google.adk", "google-adk"),
    ("telemetry.integrations.strands_agents", "strands", "strands-agents"),
])
def test_an_integration_without_its_framework_names_its_extra(
    module: str, framework: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing an integration whose framework is missing says which extra to install."""
    monkeypatch.setitem(sys.modules, framework, None)  # what import sees for an absent package
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=re.escape(f"[{extra}]")):
        importlib.import_module(module)

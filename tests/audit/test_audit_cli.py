"""``outcome-telemetry audit`` on module:attribute targets: exit status, JSON keys, SARIF locations."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.audit import SCHEMA_ID
from telemetry.audit._mcp_listing import from_listing
from telemetry.audit._report import TargetInfo, run_audit
from telemetry.audit._table import clean, render
from telemetry.cli import main as top_main

import audit_support  # noqa: F401  (skips without the extra, fails in CI)
from audit_support import answers, codes, run_cli, run_json
from sarif_required import SARIF_REQUIRED

MODULE = '''
from pathlib import Path
import tempfile
from telemetry import instrument_tool
from telemetry.guards import SQLiteStore, StateStore

STORE = StateStore(SQLiteStore(Path(tempfile.mkdtemp()) / "s.sqlite"))

@instrument_tool(kind="write")
def overwrite(key: str, value: str) -> dict:
    """Overwrite a key with a value, whatever it holds now."""
    return {"ok": True}

def bare_reader(key: str) -> str:
    """Get the value of one key from the cache."""
    return ""

TOOLS = {"overwrite": overwrite, "reader": bare_reader}
NOT_A_TOOL = 42
'''


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module ``auditapp`` on sys.path with an unversioned write, a bare read and a StateStore."""
    path = tmp_path / "auditapp.py"
    path.write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("auditapp", None)
    yield path
    sys.modules.pop("auditapp", None)


def test_help_explains_the_checks_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    """--help names the six checks (as conventions spells them), the target kinds and the exit codes,
    through the top-level command."""
    assert top_main(["audit", "--help"]) == 0
    out = capsys.readouterr().out
    for word in (*c.AUDIT_CHECKS, "--mcp-stdio", "--traces", "exit status"):
        assert word in out


def test_the_checks_are_spelled_one_way(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table's columns, the JSON's answer keys, the SARIF rule names of the noes and the docs
    spell each check as conventions does (``AUDIT_*``); the old spellings appear nowhere."""
    from telemetry.audit._rules import RULES

    code, out, _err = run_cli(capsys, "auditapp:TOOLS")
    header = out.splitlines()[0].split()
    assert header == ["tool", "kind", *c.AUDIT_CHECKS]
    _code, doc = run_json(capsys, "auditapp:TOOLS")
    assert all(tuple(t["answers"]) == c.AUDIT_CHECKS for t in doc["tools"])
    assert [RULES[f"AUD10{i}"][0] for i in range(1, len(c.AUDIT_CHECKS) + 1)] == ["not-" + n.replace("_", "-") for n in c.AUDIT_CHECKS]
    docs = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    for name in c.AUDIT_CHECKS:
        assert f"| `{name}` (`AUD10" in docs, name
    for old in ("read-back verified", "version-bound (", "semantically observable (", "idempot.", "no-readback"):
        assert old not in docs and old not in out, old


def test_no_target_and_bad_targets_are_exit_2_and_named(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No target, a missing module, a missing attribute or a non-tool: exit 2 naming the target."""
    assert run_cli(capsys)[0] == 2
    for target, said in (("nosuchmodule_xyz:f", "cannot import 'nosuchmodule_xyz'"),
                         ("auditapp:missing", "'missing' is not an attribute"),
                         ("auditapp:NOT_A_TOOL", "is a int, not a tool"),
                         ("auditapp", "is not module:attribute")):
        code, _out, err = run_cli(capsys, target)
        assert code == 2, target
        assert target in err and said in err


def test_gate_exit_status(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Default gate fails on an unversioned write; --fail-on never passes; warnings gate a guarded store."""
    assert run_cli(capsys, "auditapp:TOOLS")[0] == 1
    assert run_cli(capsys, "auditapp:TOOLS", "--fail-on", "never")[0] == 0
    assert run_cli(capsys, "auditapp:STORE")[0] == 0
    assert run_cli(capsys, "auditapp:STORE", "--fail-on", "warning")[0] == 1


def test_json_keys_are_the_documented_ones(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON document's keys and the reader's kind: declared by the decorator or inferred, and said so."""
    code, doc = run_json(capsys, "auditapp:TOOLS", "auditapp:STORE")
    assert code == 1 and doc["schema"] == SCHEMA_ID and doc["failed"] is True
    assert set(doc) == {"schema", "version", "fail_on", "failed", "summary", "targets", "traces", "tools"}
    tool = doc["tools"][0]
    assert set(tool) == {"name", "target", "kind", "kind_basis", "description", "source", "notes", "answers", "findings"}
    assert set(tool["answers"]["scoped"]) == {"answer", "evidence", "fix", "basis"}
    assert set(tool["findings"][0]) == {"code", "rule", "severity", "tool", "parameter", "message", "fix"}
    got = answers(doc)
    assert got["overwrite"]["version_bound"] == "no" and "AUD103" in codes(doc)["overwrite"]
    reader = next(t for t in doc["tools"] if t["name"] == "reader")
    assert reader["kind"] == "write" and reader["kind_basis"].startswith("inferred")  # 'reader' is no read verb
    assert got["reader"]["semantically_observable"] == "no"  # not instrumented
    assert [t["target"] for t in doc["targets"]] == ["auditapp:TOOLS", "auditapp:STORE"]
    assert doc["targets"][1]["notes"]  # force_write_state left out, said so


def test_sarif_points_at_the_python_source_line(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Python tool's results carry its file (relative to the cwd) and the line of its definition."""
    code, out, _err = run_cli(capsys, "auditapp:TOOLS", "--format", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, SARIF_REQUIRED)
    results = [r for r in log["runs"][0]["results"] if r["properties"]["tool"] == "overwrite"]
    location = results[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "auditapp.py", "uriBaseId": "SRCROOT"}
    line = next(i for i, text in enumerate(app.read_text().splitlines(), 1) if text.startswith("@instrument_tool"))
    assert location["region"]["startLine"] == line
    assert {r["level"] for r in results} >= {"error", "warning"}


hostile = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(name=hostile, description=st.text(max_size=200), param=hostile)
def test_any_listed_text_is_inert_in_the_table_and_exact_in_json(name: str, description: str, param: str) -> None:
    """Whatever a server lists, the table has no control characters and JSON round-trips it exactly."""
    listed = {"name": name, "description": description,
              "inputSchema": {"type": "object", "properties": {param: {"type": "integer", "description": description}}}}
    report = run_audit([from_listing(listed, "hostile")], [TargetInfo("hostile", "mcp-stdio", 1)])
    import io

    out = io.StringIO()
    render(report, out)
    for line in out.getvalue().splitlines():
        assert clean(line, 10**9) == line
    document = json.loads(json.dumps(report.as_dict()))
    assert document["tools"][0]["name"] == name and document["tools"][0]["description"] == description
    assert any(f["parameter"] == param for f in document["tools"][0]["findings"])


def test_source_helper_matches_inspect(app: Path) -> None:
    """The source line the audit reports is the one inspect gives for the unwrapped function."""
    import auditapp  # type: ignore[import-not-found]

    from telemetry.audit._targets import from_callable

    model = from_callable(auditapp.overwrite, "t")
    assert model.source is not None
    assert model.source.line == inspect.unwrap(auditapp.overwrite).__code__.co_firstlineno

"""A synthetic MCP server with bad schemas, audited over the real stdio client; hostile text stays data."""

from __future__ import annotations

import contextlib
import io
import json
import re

import jsonschema
import pytest

from telemetry.audit._cli import main

import audit_support  # noqa: F401  (skips without the extra, fails in CI)
from audit_support import answers, codes, run_cli, run_json, stdio_command
from hostile_tool import HOSTILE_DESCRIPTION, HOSTILE_NAME
from sarif_required import SARIF_REQUIRED

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def listing() -> dict[str, object]:
    """One audit of the bad server over stdio, as JSON (the server is started once)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--mcp-stdio", stdio_command(), "--format", "json"])
    document: dict[str, object] = json.loads(out.getvalue())
    document["_exit"] = code
    return document


def test_bad_schemas_get_their_lint_codes(listing: dict[str, object]) -> None:
    """Each rule fires on the tool built to break it, with the parameter named."""
    found = codes(listing)  # type: ignore[arg-type]
    assert {"SCH204", "SCH205", "SCH201", "SCH202"} <= found["search"]
    assert {"SCH200", "AUD103", "SCH206", "SCH209"} <= found["update_record"]
    assert {"AUD104", "AUD103"} <= found["delete_all_items"]
    assert "SCH207" in found["send_email"] and "SCH208" in found["handoff"]
    assert {"SCH203", "SCH205"} <= found["run"]
    search = next(t for t in listing["tools"] if t["name"] == "search")  # type: ignore[attr-defined]
    limit = next(f for f in search["findings"] if f["code"] == "SCH201")
    assert limit["parameter"] == "limit" and limit["severity"] == "warning" and "maximum" in limit["fix"]
    assert listing["_exit"] == 1  # critical findings fail the default gate


def test_kind_comes_from_annotations_or_says_it_was_inferred(listing: dict[str, object]) -> None:
    """readOnlyHint decides read; without annotations the basis says the kind was inferred."""
    tools = {t["name"]: t for t in listing["tools"]}  # type: ignore[attr-defined]
    assert tools["read_inventory"]["kind"] == "read"
    assert tools["read_inventory"]["kind_basis"] == "declared by MCP annotations (readOnlyHint: true)"
    assert tools["update_record"]["kind"] == "write" and tools["update_record"]["kind_basis"].startswith("inferred")
    assert tools["send_email"]["kind"] == "send" and tools["handoff"]["kind"] == "delegate"
    got = answers(listing)  # type: ignore[arg-type]
    assert got["update_record"]["version_bound"] == "no"
    assert got["delete_all_items"]["previewable"] == "no"
    assert got["read_inventory"]["semantically_observable"] == "no"  # nothing in a listing shows instrumentation


def test_hostile_name_and_description_survive_json_exactly(listing: dict[str, object]) -> None:
    """The JSON output carries the server's text exactly (escaped), never interpreted."""
    tools = {t["name"]: t for t in listing["tools"]}  # type: ignore[attr-defined]
    assert HOSTILE_NAME in tools
    assert tools[HOSTILE_NAME]["description"] == HOSTILE_DESCRIPTION


def test_table_strips_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    """The table shows the hostile tool without escapes, bells or direction overrides."""
    code, out, _err = run_cli(capsys, "--mcp-stdio", stdio_command())
    assert code == 1
    assert "evil[31m_tool" in out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]", out)


def test_sarif_has_the_required_structure(capsys: pytest.CaptureFixture[str]) -> None:
    """SARIF 2.1.0's required fields are present; MCP results carry a logical location."""
    code, out, _err = run_cli(capsys, "--mcp-stdio", stdio_command(), "--format", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, SARIF_REQUIRED)
    results = log["runs"][0]["results"]
    assert results and all(r["locations"][0]["logicalLocations"][0]["name"] for r in results)
    assert any(r["locations"][0]["logicalLocations"][0]["name"] == HOSTILE_NAME for r in results)
    rule_ids = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    assert all(rule_ids[r["ruleIndex"]] == r["ruleId"] for r in results)


def test_a_server_that_does_not_start_is_exit_2_and_named(capsys: pytest.CaptureFixture[str]) -> None:
    """A command that is not an MCP server is a target that cannot be loaded: exit 2, named."""
    code, _out, err = run_cli(capsys, "--mcp-stdio", "/nonexistent/server --flag", "--timeout", "10")
    assert code == 2 and "--mcp-stdio '/nonexistent/server --flag'" in err


def test_mcp_url_lists_a_running_server(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    """--mcp-url reads tools/list from the bad server over Streamable HTTP on 127.0.0.1."""
    import socket
    import subprocess
    import sys
    import time

    from audit_support import BAD_SERVER

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(BAD_SERVER), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # the server imports the SDK first: seconds on a loaded machine
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "the MCP server did not start listening"
            time.sleep(0.05)
        code, document = run_json(capsys, "--mcp-url", f"http://127.0.0.1:{port}/mcp", "--fail-on", "never")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert code == 0
    assert "update_record" in answers(document)
    assert document["targets"][0]["kind"] == "mcp-url"

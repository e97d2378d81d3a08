"""The audit reads the error contract (actionable_errors) and the verification contract (a write
verified through a cache) from declarations, real trace files and an MCP server's tool plan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver import MCPServer

import telemetry
import telemetry.mcp
from telemetry import conventions as c
from telemetry.audit import NO, YES, audit_tools, run_audit
from telemetry.audit import _mcp_listing as mcp_listing
from telemetry.audit._model import ACTIONABLE_ERRORS, READBACK_VERIFIED
from telemetry.audit._report import TargetInfo
from telemetry.audit._table import render
from telemetry.audit._targets import tools_of
from telemetry.audit._traces import collect
from telemetry.guards import reads_cache, refusal, success, verification_required
from telemetry.mcp import ToolContract, expose_tool_plan

import audit_support  # noqa: F401  (skips without the extra, fails in CI)

LEAK = "Traceback (most recent call last):\n  File \"/srv/app/rates.py\", line 88, in fetch\nKeyError: 'sku'"


def _tools() -> dict[str, Any]:
    cache: dict[str, str] = {}

    @telemetry.instrument_tool(kind="read")
    def leaky_lookup(sku: str) -> dict[str, Any]:
        return {"ok": False, "error": "lookup failed", "message": LEAK}

    @telemetry.instrument_tool(kind="read")
    def vague_lookup(sku: str) -> dict[str, Any]:
        return {"success": False, "error": "Something went wrong, please try again"}

    @telemetry.instrument_tool(kind="read")
    def limited_lookup(sku: str) -> dict[str, Any]:
        return {"status_code": 429}

    @telemetry.instrument_tool(kind="read")
    def good_lookup(sku: str) -> dict[str, Any]:
        return refusal(c.OUTCOME_RATE_LIMITED, "Wait 2 s and call again.", retry=True, retry_after_seconds=2.0,
                       recovery_tool="get_cached_email")

    @telemetry.instrument_tool(kind="read")
    @reads_cache
    def get_cached_email(user: str) -> dict[str, Any]:
        return {"ok": True, "email": cache.get(user)}

    @telemetry.instrument_tool(kind="write")
    def set_email(user: str, email: str, expected_version: str) -> dict[str, Any]:
        cache[user] = email
        return success(verification_required=verification_required(
            "get_cached_email", arguments={"user": user}, compare={"email": email}))

    return {f.__name__: f for f in (leaky_lookup, vague_lookup, limited_lookup, good_lookup, get_cached_email, set_email)}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    """The tools, each called through a real runtime writing real trace files."""
    tools = _tools()
    folder = tmp_path_factory.mktemp("contract-traces")
    rt = telemetry.configure(service_name="contract", traces_dir=folder)
    try:
        for name in ("leaky_lookup", "vague_lookup", "limited_lookup", "good_lookup"):
            tools[name]("SKU-1")
        tools["get_cached_email"]("u-1")
        tools["set_email"]("u-1", "a@example.com", "v1")
    finally:
        rt.shutdown()
    yield tools, folder


def test_traces_show_which_errors_a_model_cannot_act_on(traced: tuple[dict[str, Any], Path]) -> None:
    tools, folder = traced
    models = tools_of(list(tools.values()), "contract")
    report = run_audit(models, [TargetInfo("contract", "python", len(models))], collect([str(folder)]))
    by_name = {t.tool.name: t for t in report.tools}
    leaky = by_name["leaky_lookup"].answers[ACTIONABLE_ERRORS]
    assert leaky.verdict == NO and "exception text" in leaky.evidence and "named no code" in leaky.evidence
    assert {f.severity for f in by_name["leaky_lookup"].findings if f.code == "AUD107"} == {"critical"}
    assert "named no code" in by_name["vague_lookup"].answers[ACTIONABLE_ERRORS].evidence
    limited = by_name["limited_lookup"].answers[ACTIONABLE_ERRORS]
    assert limited.verdict == NO and "gave no retry-after" in limited.evidence and limited.fix
    good = by_name["good_lookup"].answers[ACTIONABLE_ERRORS]
    assert good.verdict == YES and good.basis == ("declaration", "traces")
    email = by_name["set_email"].answers[READBACK_VERIFIED]
    assert email.verdict == NO and "get_cached_email, which reads a cache" in email.evidence
    assert [f.severity for f in by_name["set_email"].findings if f.code == "AUD105"] == ["critical"]


def test_the_table_prints_the_fix_and_never_the_leaked_text(traced: tuple[dict[str, Any], Path]) -> None:
    import io

    tools, folder = traced
    models = tools_of(list(tools.values()), "contract")
    out = io.StringIO()
    render(run_audit(models, [TargetInfo("contract", "python", len(models))], collect([str(folder)])), out)
    text = out.getvalue()
    assert "AUD107" in text and "retry_after_seconds" in text
    assert "/srv/app/rates.py" not in text and "KeyError" not in text


def test_the_audit_reads_a_servers_tool_plan(tmp_path: Path) -> None:
    """An in-process MCPServer with the meta tool: the plan names the cached verification read."""
    server = MCPServer("contract")
    tools = _tools()
    for name in ("get_cached_email", "set_email", "good_lookup"):
        server.add_tool(tools[name], name=name)
    expose_tool_plan(server, {"set_email": ToolContract(verify="get_cached_email")})
    report = audit_tools(server, label="server")
    by_name = {t.tool.name: t for t in report.tools}
    assert by_name["get_cached_email"].tool.reads_cache is True
    assert by_name["set_email"].tool.verify_tool == "get_cached_email"
    assert by_name["set_email"].answers[READBACK_VERIFIED].verdict == NO
    assert by_name["good_lookup"].answers[ACTIONABLE_ERRORS].verdict == YES
    assert by_name[c.TOOL_PLAN_NAME].kind == c.KIND_READ


def test_the_sql_and_the_python_forms_of_exception_text_agree() -> None:
    """The audit reads recorded results with the SQL form of telemetry.envelopes.exception_text."""
    import duckdb

    from telemetry.audit._traces import EXCEPTION_PATTERN
    from telemetry.envelopes import exception_text

    samples = [LEAK, 'File "/srv/app.py", line 12, in f', "KeyError: 'sku'", "psycopg.errors.UniqueViolation: dup",
               "ValueError(\"bad\")", "at com.acme.Rates.fetch(Rates.java:88)", "carrier.RateLimitError: 429",
               "The carrier's rate limit is in effect. Wait 2 s.", "Error: the card was declined", "no profile", ""]
    con = duckdb.connect()
    for text in samples:
        found = con.execute("SELECT regexp_matches($t, $p)", {"t": text, "p": EXCEPTION_PATTERN}).fetchone()
        assert found is not None and found[0] == exception_text(text), text


JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=200)),
                    lambda inner: st.one_of(st.lists(inner, max_size=5),
                                            st.dictionaries(st.sampled_from(["step", "tool", "sequence", "reads_cache",
                                                                             "name", "by", "x"]), inner, max_size=5)),
                    max_leaves=15)


@settings(max_examples=300, deadline=None)
@given(JSON, JSON)
def test_a_hostile_plan_entry_is_read_as_data_or_ignored(entry: Any, meta: Any) -> None:
    """What a server's plan says is untrusted: any shape gives a bool and a bounded name, or nothing."""
    tool = {"name": "set_email", mcp_listing.PLAN_ENTRY: entry, "_meta": meta if isinstance(meta, dict) else {}}
    model = mcp_listing.from_listing(tool, "hostile")
    assert isinstance(model.reads_cache, bool)
    assert model.verify_tool is None or (isinstance(model.verify_tool, str) and len(model.verify_tool) <= 128)

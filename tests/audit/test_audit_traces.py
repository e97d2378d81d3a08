"""An audit over the demo's real traces: what the tools did overrules what they declare."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from telemetry.audit import NO, YES, run_audit
from telemetry.audit._model import IDEMPOTENT, READBACK_VERIFIED, SCOPED, SEMANTICALLY_OBSERVABLE
from telemetry.audit._report import TargetInfo
from telemetry.audit._targets import tools_of
from telemetry.audit._traces import collect
from telemetry.demo._runner import run_crew
from telemetry.demo._surfaces import legacy_tools
from telemetry.demo._world import World

import audit_support  # noqa: F401  (skips without the extra, fails in CI)
from audit_support import answers, run_cli, run_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def traces_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The crew's traces for every scenario in both modes (a few seconds, no alerts)."""
    out = tmp_path_factory.mktemp("demo")
    return run_crew(out).traces_dir


def test_traces_alone_show_repeats_unpersisted_writes_and_outcomes(traces_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The double charge is a repeated execution, the cached read-back a write that did not persist."""
    code, doc = run_json(capsys, "--traces", str(traces_dir))
    got = answers(doc)
    assert doc["traces"]["spans"] > 0 and code == 1
    assert got["legacy_charge_card"][IDEMPOTENT] == NO
    charge = next(t for t in doc["tools"] if t["name"] == "legacy_charge_card")
    assert "repeated execution" in charge["answers"][IDEMPOTENT]["evidence"]
    assert {f["severity"] for f in charge["findings"] if f["code"] == "AUD102"} == {"critical"}
    assert got["charge_card"][IDEMPOTENT] == YES  # its retry was deduplicated
    assert got["legacy_update_email"][READBACK_VERIFIED] == NO
    assert got["write_state"][READBACK_VERIFIED] == YES
    assert all(a[SEMANTICALLY_OBSERVABLE] == YES for a in got.values())  # every span carries tool.outcome
    assert all(t["answers"][IDEMPOTENT]["basis"] == ["traces"] or t["kind"] == "read"
               or "only traces" in t["answers"][IDEMPOTENT]["evidence"] for t in doc["tools"])


def test_declaration_and_traces_merge(traces_dir: Path, tmp_path: Path) -> None:
    """A read-back the decorator declares but the traces show did not hold becomes a no, on both bases."""
    world = World(tmp_path / "w.sqlite", random.Random(1), catalog_size=1)
    try:
        models = tools_of(legacy_tools(world), "legacy")
    finally:
        world.store.close()
    report = run_audit(models, [TargetInfo("legacy", "python", len(models))], collect([str(traces_dir)]))
    email = next(t for t in report.tools if t.tool.name == "legacy_update_email")
    answer = email.answers[READBACK_VERIFIED]
    assert answer.verdict == NO and answer.basis == ("declaration", "traces")
    assert "readback= is declared" in answer.evidence and "did not persist" in answer.evidence
    assert [f.severity for f in email.findings if f.code == "AUD105"] == ["critical"]
    assert not any(t.tool.from_traces_only for t in report.tools if t.tool.name == "legacy_update_email")
    assert any(t.tool.from_traces_only and t.tool.name == "write_state" for t in report.tools)


def test_scopes_file_turns_calls_outside_scope_into_violations(traces_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """An agent's call to a tool its scope does not list is a critical scope violation, named."""
    scopes = tmp_path / "scopes.json"
    scopes.write_text(json.dumps({"*": ["read_state", "write_state"]}))
    _code, doc = run_json(capsys, "--traces", str(traces_dir), "--scopes", str(scopes))
    got = answers(doc)
    assert got["write_state"][SCOPED] == YES
    charge = next(t for t in doc["tools"] if t["name"] == "legacy_charge_card")
    assert got["legacy_charge_card"][SCOPED] == NO
    assert "outside the caller's declared scope" in charge["answers"][SCOPED]["evidence"]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    code, _out, err = run_cli(capsys, "--traces", str(traces_dir), "--scopes", str(bad))
    assert code == 2 and str(bad) in err


def test_missing_trace_path_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A trace path that does not exist is a target that cannot be loaded."""
    code, _out, err = run_cli(capsys, "--traces", str(tmp_path / "nothing-here"))
    assert code == 2 and "nothing-here" in err


def test_demo_ends_with_the_audit_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`outcome-telemetry demo` prints one audit line comparing the guarded and the legacy surfaces."""
    from telemetry.demo._cli import main as demo_main

    demo_main(["--scenario", "retry_after_timeout", "--no-alerts", "--out", str(tmp_path)])
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("audit: guarded 15 tools, 48/69 yes, 1 critical; legacy 8 tools, 10/41 yes, 5 critical")


HERE = Path(__file__).resolve().parent.parent
PEER_FILES = [pytest.param(HERE / "forensics" / "peer_fixtures" / f"{fmt}.jsonl", id=f"hand-{fmt}")
              for fmt in ("genai", "openinference", "traceloop", "langfuse", "mlflow", "selected")] + [
    pytest.param(path, id=path.stem) for path in sorted((HERE / "peers" / "fixtures").glob("*.jsonl"))]
"""The story in every peer format: tests/forensics' small fixtures and tests/peers' real instrumentors'."""


@pytest.mark.parametrize("fixture", PEER_FILES)
def test_traces_other_instrumentations_wrote_list_their_tools(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The three tools are listed from their peer spans, the refund repeated with identical
    arguments is not idempotent, and each call's outcome comes from its recorded result (logfire's
    plain spans through --tool-spans)."""
    real = fixture.parent.name == "fixtures"
    if fixture.stem == "selected":
        selector = ["--tool-spans", "Calling shop.tools.*"]
    elif fixture.stem == "logfire":
        selector = ["--tool-spans", str(HERE / "forensics" / "peer_fixtures" / "logfire-tools.json")]
    else:
        selector = []
    charge, refund, lookup = ("charge_card", "refund_payment", "lookup_order") if real else ("charge", "refund", "lookup_order")
    _code, doc = run_json(capsys, "--traces", str(fixture), *selector)
    assert sorted(t["name"] for t in doc["tools"]) == sorted([charge, refund, lookup])
    assert doc["traces"]["tools"] == 3
    got = answers(doc)
    assert got[refund][IDEMPOTENT] == NO
    repeated = next(t for t in doc["tools"] if t["name"] == refund)
    assert "identical arguments" in repeated["answers"][IDEMPOTENT]["evidence"]
    assert all(a[SEMANTICALLY_OBSERVABLE] == YES for a in got.values())  # every call's result was judged
    kinds = {t["name"]: t["kind"] for t in doc["tools"]}
    assert kinds[lookup] == "read" and kinds[charge] == "write"

"""The crew end to end: every injected incident found by the right question and nothing else."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.demo import SCENARIOS, run_crew, score
from telemetry.demo._runner import CrewResult
from telemetry.forensics import QUESTION_NAMES, headline, open_traces, question, tally


def findings(result: CrewResult) -> dict[str, list[dict[str, object]]]:
    with open_traces([result.traces_dir]) as forensics:
        return {name: forensics.run(name) for name in QUESTION_NAMES}


@pytest.fixture(scope="module")
def seeded_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[CrewResult, dict[str, list[dict[str, object]]]]]:
    """Three full crew runs (every scenario, both modes), with background traffic on one."""
    runs = {}
    for seed in (1, 7, 23):
        extra = {"agents": 4, "steps": 5} if seed == 23 else {}
        result = run_crew(tmp_path_factory.mktemp(f"crew-{seed}"), seed=seed, **extra)
        runs[seed] = (result, findings(result))
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 7, 23])
def test_precision_and_recall_are_one(seed: int, seeded_runs: dict) -> None:
    """Forensics finds every incident the manifest lists, and reports nothing the manifest does not explain."""
    result, rows = seeded_runs[seed]
    outcome = score(result.manifest, rows)
    assert outcome.missed == [], outcome.missed
    assert outcome.unexplained == [], outcome.unexplained
    assert outcome.recall == 1.0 and outcome.precision == 1.0
    assert {i.scenario for i in result.manifest.incidents} == set(SCENARIOS)


@pytest.mark.slow
def test_guarded_runs_prevent_every_failure(seeded_runs: dict) -> None:
    """Guarded: no lost update, no lost constraint, no accepted stale send, the postcondition caught, nothing double-charged."""
    result, rows = seeded_runs[7]
    guarded = {i.run_id for i in result.manifest.incidents if i.mode == "guarded"}
    assert not [r for r in rows["lost_updates"] if r["run_id"] in guarded]
    assert not [r for r in rows["constraint_loss_by_hop"] if r["run_id"] in guarded]
    assert not [r for r in rows["stale_sends"] if r["run_id"] in guarded and r["kind"] != "refused"]
    assert [r for r in rows["plan_violations"] if r["run_id"] in guarded and r["violation"] == c.OUTCOME_POSTCONDITION_FAILED]
    facts = {(i.scenario, i.mode): i.facts for i in result.manifest.incidents}
    assert facts[("split_brain", "guarded")]["a_step_survived"] and facts[("split_brain", "guarded")]["b_step_survived"]
    assert facts[("split_brain", "legacy")]["a_step_survived"] is False
    assert facts[("retry_after_timeout", "guarded")]["times_charged"] == 1
    assert facts[("retry_after_timeout", "legacy")]["times_charged"] == 2
    assert facts[("wrong_collection", "guarded")]["other_changed"] == 0
    legacy_reprice = facts[("wrong_collection", "legacy")]
    assert legacy_reprice["other_changed"] > 0 and legacy_reprice["target_changed"] == 0
    assert facts[("stale_cache_readback", "guarded")]["database_email"].endswith("@new.example")
    assert facts[("stale_cache_readback", "legacy")]["database_email"].endswith("@old.example")
    assert facts[("context_drift", "guarded")]["fan_out"] == ["responder"]


@pytest.mark.slow
def test_legacy_harm_happened_guarded_harm_was_prevented_and_nothing_prevented_is_critical(seeded_runs: dict) -> None:
    """The manifest records each expected row's verdict: every finding of a legacy story happened,
    every one of a guarded story was prevented (scoring checks the rows carry them); the text
    report lists no prevented row as critical and its headline counts both."""
    result, rows = seeded_runs[7]
    for incident in result.manifest.incidents:
        for expected in incident.expected:
            if question(expected.question).is_finding:
                wanted = c.VERDICT_HAPPENED if incident.mode == "legacy" else c.VERDICT_PREVENTED
                assert expected.verdict == wanted, (incident.scenario, incident.mode, expected)
    assert score(result.manifest, rows).precision == 1.0
    counts = tally(rows)
    legacy = sum(1 for i in result.manifest.incidents for e in i.expected
                 if i.mode == "legacy" and question(e.question).is_finding)
    guarded = sum(1 for i in result.manifest.incidents for e in i.expected
                  if i.mode == "guarded" and question(e.question).is_finding)
    assert counts == {c.VERDICT_HAPPENED: legacy, c.VERDICT_PREVENTED: guarded, c.VERDICT_UNKNOWN: 0}
    with open_traces([result.traces_dir]) as forensics:
        text = forensics.report().render("table")
    assert text.splitlines()[1] == f"Verdict: {headline(counts)}"
    critical = text.split("\nCRITICAL\n")[1].split("\nWARNING\n")[0]
    assert re.findall(r"verdict +(\w+)", critical) and set(re.findall(r"verdict +(\w+)", critical)) == {"happened"}


@pytest.mark.slow
def test_counters_equal_the_refusals_the_agents_saw(seeded_runs: dict) -> None:
    """tool_guard_refusals_total by reason equals the refusal envelopes the scripted agents were handed."""
    result, _ = seeded_runs[7]
    seen = Counter(code for i in result.manifest.incidents for code in i.refusals if code in c.REFUSAL_OUTCOMES)
    counted = Counter()
    for (name, labels), value in result.samples.items():
        if name == c.METRIC_GUARD_REFUSALS_TOTAL and value:
            counted[dict(labels)[c.LABEL_REASON]] += int(value)
    assert seen == counted and seen  # and the run did refuse something
    assert result.sample(c.METRIC_STALE_SENDS_TOTAL) == seen[c.OUTCOME_STALE_POLICY] == 2  # the $32 credit, the scheduled push
    assert result.sample(c.METRIC_IDEMPOTENT_REPLAYS_TOTAL) == 1
    assert result.sample(c.METRIC_CONSTRAINT_WAIVERS_TOTAL) == 1


def test_one_scenario_one_mode_and_bad_options(tmp_path: Path) -> None:
    """Scenario and mode selection run just that; unknown names are refused clearly."""
    result = run_crew(tmp_path, scenarios=["split_brain"], modes=["legacy"], seed=3)
    assert [(i.scenario, i.mode) for i in result.manifest.incidents] == [("split_brain", "legacy")]
    outcome = score(result.manifest, findings(result))
    assert outcome.recall == 1.0 and outcome.precision == 1.0
    with pytest.raises(ValueError, match="unknown scenario"):
        run_crew(tmp_path, scenarios=["meteor_strike"])
    with pytest.raises(ValueError, match="unknown mode"):
        run_crew(tmp_path, modes=["yolo"])

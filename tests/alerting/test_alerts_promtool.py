"""The shipped rules pass promtool, their unit tests pass, and the unit tests cover every alert."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from telemetry import conventions as c
from telemetry.runtime._resources import data_dir, data_file

import shipped

TIMEOUT = 120


def run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def test_promtool_check_rules_passes(promtool: str) -> None:
    """`promtool check rules` accepts every shipped rule file."""
    files = shipped.rule_files()
    assert files, f"no {shipped.RULES_GLOB} in {data_dir('alerts')}"
    result = run([promtool, "check", "rules", *map(str, files)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass(promtool: str) -> None:
    """`promtool test rules` passes every shipped unit-test file.

    promtool runs the files of one invocation one after another, so the files are shared out
    (largest first) among one promtool per core, run at once; each file's own section of its
    promtool's report must say SUCCESS, and each promtool must exit 0.
    """
    files = sorted(shipped.unit_test_files(), key=lambda path: path.stat().st_size, reverse=True)
    assert files
    batches: list[list[Path]] = [[] for _ in range(min(os.cpu_count() or 1, len(files)))]
    for path in files:
        min(batches, key=lambda batch: sum(p.stat().st_size for p in batch)).append(path)
    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        results = list(pool.map(lambda batch: run([promtool, "test", "rules", *map(str, batch)]), batches))
    failed = {}
    for batch, result in zip(batches, results):
        report = result.stdout + result.stderr
        # promtool's report: "Unit Testing:  PATH" then that file's SUCCESS or FAILED lines.
        sections = {part.strip().splitlines()[0].strip(): part for part in result.stdout.split("Unit Testing:") if part.strip()}
        bad = [path for path in batch if "SUCCESS" not in sections.get(str(path), "")]
        if result.returncode != 0 and not bad:
            bad = batch  # promtool failed without saying which file: each of its files is suspect
        failed.update({path.name: sections.get(str(path)) or report for path in bad})
    assert not failed, failed


def test_unit_tests_fail_when_the_page_is_broken(promtool: str, tmp_path: Path) -> None:
    """The unit tests can fail: with the silent-failure alert neutered they report the miss."""
    rules = yaml.safe_load(shipped.rule_files()[0].read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == c.ALERT_SILENT_FAILURE:
                rule["expr"] = "vector(0) > 1"
    (tmp_path / shipped.rule_files()[0].name).write_text(yaml.safe_dump(rules))
    (tmp_path / "tests").mkdir()
    # Only the file's first case (the page firing on a bad outcome): the rest would cost seconds
    # of promtool evaluations and cannot fail for a neutered alert that this one does not catch.
    test_file = data_dir("alerts") / "tests" / "silent_failure.yml"
    unit_tests = yaml.safe_load(test_file.read_text())
    first = unit_tests["tests"][0]
    assert any(case["alertname"] == c.ALERT_SILENT_FAILURE and case["exp_alerts"] for case in first["alert_rule_test"])
    unit_tests["tests"] = [first]
    (tmp_path / "tests" / test_file.name).write_text(yaml.safe_dump(unit_tests))
    result = run([promtool, "test", "rules", str(tmp_path / "tests" / test_file.name)])
    assert result.returncode != 0 and c.ALERT_SILENT_FAILURE in result.stdout + result.stderr


def _alert_tests() -> list[tuple[str, str, bool]]:
    """(file name, alert name, expects it firing) for every alert_rule_test case."""
    cases = []
    for path in shipped.unit_test_files():
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                cases.append((path.name, case["alertname"], bool(case.get("exp_alerts"))))
    return cases


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    """Each alert has a unit test where it fires and one where it must not."""
    cases = _alert_tests()
    for alert in c.ALERTS:
        assert (alert, True) in {(a, f) for _, a, f in cases}, f"no unit test where {alert} fires"
        assert (alert, False) in {(a, f) for _, a, f in cases}, f"no unit test where {alert} must stay quiet"


@pytest.mark.parametrize("file_name", ["all_green.yml", "all_green_hours.yml"])
def test_all_green_unit_test_checks_every_alert(file_name: str) -> None:
    """all_green.yml (no bad outcomes, with and without counter resets) checks every alert, and
    all_green_hours.yml (the same traffic hours later) checks every alert again."""
    green = {a for name, a, fires in _alert_tests() if name == file_name and not fires}
    assert green == set(c.ALERTS)
    assert not [a for name, a, fires in _alert_tests() if name == file_name and fires]


def test_alerts_carry_severity_summary_and_a_forensics_question() -> None:
    """Every alert has a severity, a summary, and a description naming what to run first:
    `forensics report PATHS` or `forensics run QUESTION PATHS` with a real question."""
    questions = {path.stem for path in data_dir("queries").glob("*.sql")} - {"spans"}
    docs = shipped.DOCS.read_text()
    for rule in shipped.alert_rules():
        name = rule["alert"]
        assert rule["labels"][c.LABEL_SEVERITY] in (c.SEVERITY_CRITICAL, c.SEVERITY_WARNING), name
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], name
        match = re.fullmatch(r"outcome-telemetry forensics (?:report|run (\w+)) PATHS", notes["forensics"])
        assert match and match.group(1) in questions | {None}, f"{name}: unknown forensics command {notes['forensics']!r}"
        assert notes["forensics"] in notes["description"], f"{name}: description does not say what to run first"
        anchor = notes["runbook"].split("#", 1)[1]
        assert f"\n### {name}\n" in docs and anchor == name.lower(), f"{name}: no runbook section in docs/alerts.md"


def test_example_prometheus_config_is_valid(promtool: str, tmp_path: Path) -> None:
    """`promtool check config` accepts the example config with the shipped rules beside it."""
    config = tmp_path / "prometheus.yml"
    shutil.copy(data_file("alerts", "prometheus.example.yml"), config)
    (tmp_path / "outcome-telemetry").mkdir()
    for path in shipped.rule_files():
        shutil.copy(path, tmp_path / "outcome-telemetry" / path.name)
    result = run([promtool, "check", "config", str(config)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout, result.stdout


@pytest.mark.parametrize("path", shipped.unit_test_files(), ids=lambda p: p.name)
def test_unit_test_files_load_the_shipped_rules(path: Path) -> None:
    """Each unit-test file tests the shipped rule file itself, not a copy."""
    loaded = yaml.safe_load(path.read_text())
    targets = {(path.parent / name).resolve() for name in loaded["rule_files"]}
    assert targets == {p.resolve() for p in shipped.rule_files()}

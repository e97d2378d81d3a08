"""The demo's summary: what each scenario did, what the agents were told, what forensics found,
and which alerts would fire. Written to be read by a person in under a minute.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ..forensics import headline, tally
from ..forensics._questions import question as forensics_question
from ._alerting import FiringAlert
from ._manifest import Incident, Score
from ._runner import CrewResult

_WIDTH = 100


@dataclass
class Findings:
    """Forensics' answer for one run, and how it scored against the manifest."""

    rows: Mapping[str, Sequence[Mapping[str, Any]]]
    score: Score


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(text, width=_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def _found_for(incident: Incident, findings: Findings) -> list[str]:
    """The questions (with row counts) whose rows this incident explains."""
    out = []
    for expected in incident.expected:
        n = sum(1 for row in findings.rows.get(expected.question, []) if expected.matches(expected.question, row))
        verdict = f", {expected.verdict}" if expected.verdict else ""
        out.append(f"{expected.question} ({n} row{'s' if n != 1 else ''}{verdict})" if n
                   else f"{expected.question} MISSED")
    return sorted(set(out))


def print_report(
    result: CrewResult,
    findings: Findings,
    alerts: Sequence[FiringAlert] | None,
    alerts_skipped: str | None,
    stream: TextIO,
) -> None:
    manifest = result.manifest
    spans = sum(v for (n, _), v in result.samples.items() if n == "tool_call_duration_seconds_count")
    modes = sorted({i.mode for i in manifest.incidents})
    print(
        f"outcome-telemetry demo: seed {manifest.seed}, {len({i.scenario for i in manifest.incidents})} scenarios "
        f"x {len(modes)} mode{'s' if len(modes) > 1 else ''}, {spans:,.0f} tool calls in {result.seconds:.1f} s",
        file=stream,
    )
    by_scenario: dict[str, list[Incident]] = {}
    for incident in manifest.incidents:
        by_scenario.setdefault(incident.scenario, []).append(incident)
    for number, (scenario, incidents) in enumerate(by_scenario.items(), start=1):
        print(f"\n{number}. {scenario.replace('_', ' ')}: {incidents[0].story}", file=stream)
        for incident in incidents:
            verdict = "stopped at call time; the agent recovered" if incident.mode == "guarded" else 'went through "green"'
            print(f"   {incident.mode}: {verdict}", file=stream)
            for step in incident.steps:
                print(_wrap(step, "     - "), file=stream)
            for told in incident.told[:1]:
                print(_wrap(f"told {told}", "     > "), file=stream)
            facts = ", ".join(f"{k}={v}" for k, v in incident.facts.items())
            if facts:
                print(_wrap(f"facts: {facts}", "     "), file=stream)
            print(_wrap("found by: " + ", ".join(_found_for(incident, findings)), "     "), file=stream)
    score = findings.score
    found = sum(len(rows) for name, rows in findings.rows.items() if forensics_question(name).is_finding)
    records = sum(len(rows) for name, rows in findings.rows.items() if not forensics_question(name).is_finding)
    print(file=stream)
    print(_wrap(f"forensics over {result.traces_dir}: {found} finding(s) and {records} record(s) "
                f"(waivers and refusals), counted as `forensics report` counts them", ""), file=stream)
    print(_wrap(f"verdict: {headline(tally(findings.rows))}", "   "), file=stream)

    print(f"   precision {score.precision:.2f}, recall {score.recall:.2f} against the "
          f"{len(score.found) + len(score.missed)} expected rows of {result.manifest_path.name}", file=stream)
    for question, row in score.unexplained[:5]:
        print(_wrap(f"unexplained {question} row: {dict(row)}", "   ! "), file=stream)
    for scenario, mode, expected in score.missed[:5]:
        print(_wrap(f"missed: {scenario}/{mode} expected {expected.question} {dict(expected.match)}", "   ! "), file=stream)
    if alerts_skipped:
        print(f"\nalerts: skipped ({alerts_skipped})", file=stream)
    elif alerts is not None:
        print(f"\nalerts that would fire (promtool, the shipped rules, this run's counters): {len(alerts)}", file=stream)
        for alert in alerts:
            where = alert.tool or ",".join(f"{k}={v}" for k, v in alert.labels.items() if k != "severity")
            print(f"   {alert.severity:8} {alert.name:34} {where}", file=stream)
    print(
        f"\nnext: outcome-telemetry forensics report {result.traces_dir}\n"
        f"      outcome-telemetry forensics run divergent_reads {result.traces_dir}",
        file=stream,
    )

"""``outcome-telemetry demo``: run the crew, then forensics and alert evaluation over its output."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .. import conventions as c
from .._command import EXIT_FINDINGS, EXIT_OK, CommandError, command_parser, dispatch, output_folder, writing
from ..exceptions import ConfigurationError
from ..forensics import headline, open_traces, tally
from ..forensics.html import write_html
from ..runtime._resources import data_dir
from ._alerting import FiringAlert, samples_from_registry, would_fire
from ._manifest import score
from ._report import Findings, print_report
from ._runner import CrewResult, run_crew, stderr_progress
from ._scenarios import MODES, SCENARIOS
from ._surfaces import audit_summary

__all__ = ["MAX_AGENTS", "MAX_BACKGROUND_STEPS", "MAX_SEED", "MAX_STEPS", "build_parser", "execute", "main"]

MAX_AGENTS = 1_000
MAX_STEPS = 10_000
MAX_BACKGROUND_STEPS = 100_000
"""Most agent-steps of background traffic (``--agents`` x ``--steps``) in one run: each writes
a few KB of traces per mode, so the bound keeps the largest run's traces and time modest."""
MAX_SEED = 2**32 - 1

EPILOG = """\
scenarios: """ + ", ".join(SCENARIOS) + f"""

bounds: --agents 0..{MAX_AGENTS:,}, --steps 0..{MAX_STEPS:,}, --agents x --steps at most
{MAX_BACKGROUND_STEPS:,}, --seed 0..{MAX_SEED:,}, --metrics-port 0..65535; --out must be a folder (or
a path one can be created at). A bad value exits with status 2 before anything is written.

Each scenario forces one failure story. Guarded, the guard refuses it at call time and the
scripted agent recovers; legacy, it goes through "green" and only the telemetry shows it.
The run leaves in --out: traces/ (OTLP JSON lines), one SQLite file per mode (none with --store), manifest.json
(the ground truth of what was injected), report.html (the forensics report as one page); a second
run into the same folder replaces them. The exit status is 1 when forensics does not find
exactly what the manifest says (precision and recall both 1), 2 for bad input, 3 for a bug.

examples:
  outcome-telemetry demo
  outcome-telemetry demo --scenario split_brain --mode legacy
  outcome-telemetry demo --seed 3 --agents 50 --steps 200      # a large realistic trace set
  outcome-telemetry demo --serve                               # keep /metrics up for Prometheus
  outcome-telemetry demo --store postgresql://crew@db:5432/crew  # the guards on PostgreSQL
"""


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "demo",
        "Run a scripted agent crew through every failure story, guarded and legacy, then show what "
        "each agent was told, what forensics found, and which alerts would fire.",
        EPILOG)
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), metavar="NAME",
                        help="run only this scenario (repeatable; default: all)")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both", help="default: %(default)s")
    parser.add_argument("--seed", type=int, default=7, help="seed of the run (default: %(default)s)")
    parser.add_argument("--agents", type=int, default=0, help="background agents doing healthy work (default: 0)")
    parser.add_argument("--steps", type=int, default=0, help="steps per background agent (default: 0)")
    parser.add_argument("--out", type=output_folder, default=Path("demo-output"), metavar="DIR",
                        help="output folder (default: %(default)s)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="summary format (default: text)")
    parser.add_argument("--no-alerts", action="store_true", help="skip the promtool alert evaluation")
    parser.add_argument("--promtool", type=Path, metavar="PATH",
                        help="promtool to evaluate the alert rules with (default: the one on PATH; "
                        "Debian: apt-get install prometheus)")
    parser.add_argument("--serve", action="store_true", help="keep /metrics up after the run (Ctrl-C stops)")
    parser.add_argument("--store", metavar="URL", default=None,
                        help="run the guards on PostgreSQL at this postgresql:// URL (in schemas "
                             "outcome_telemetry_demo_guarded and _legacy, replaced each run) instead of SQLite files")
    parser.add_argument("--metrics-port", type=int, default=9464, metavar="P",
                        help="/metrics port with --serve, on 127.0.0.1 (0 picks a free one; default: %(default)s)")
    return parser


def _serve_instructions(result: CrewResult) -> str:
    url = result.runtime.metrics_url if result.runtime is not None else None
    target = url.split("/")[2] if url else "127.0.0.1:9464"
    config = result.out_dir / "prometheus.yml"
    rules = data_dir("alerts") / "outcome-telemetry.rules.yml"
    config.write_text(
        "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n"
        f"rule_files:\n  - {rules}\n"
        f"scrape_configs:\n  - job_name: crew\n    static_configs:\n      - targets: ['{target}']\n"
    )
    return (
        f"serving /metrics at {url} (Ctrl-C to stop)\n"
        f"start Prometheus on this machine with:\n"
        f"  prometheus --config.file={config} --web.listen-address=127.0.0.1:9090 "
        f"--storage.tsdb.path={result.out_dir / 'prometheus-data'} --enable-feature=exemplar-storage\n"
        f"and import {data_dir('dashboards') / 'outcome-telemetry.json'} into Grafana "
        f"(provisioning files: {data_dir('dashboards') / 'provisioning'})"
    )


def _argument_problem(ns: argparse.Namespace) -> str | None:
    """What is out of bounds in the arguments (None when nothing is), checked before any work."""
    for flag, value, high in (("--agents", ns.agents, MAX_AGENTS), ("--steps", ns.steps, MAX_STEPS),
                              ("--seed", ns.seed, MAX_SEED), ("--metrics-port", ns.metrics_port, 65535)):
        if not 0 <= value <= high:
            return f"{flag} {value} is out of range: pass a whole number from 0 to {high:,}"
    if ns.agents * ns.steps > MAX_BACKGROUND_STEPS:
        return (
            f"--agents {ns.agents} x --steps {ns.steps} is {ns.agents * ns.steps:,} agent-steps; the limit is "
            f"{MAX_BACKGROUND_STEPS:,} (about 2.5 KB of traces each, per mode): lower one of them"
        )
    return None


def execute(ns: argparse.Namespace) -> int:
    """The body of ``outcome-telemetry demo``, on parsed arguments: every bound checked first."""
    if ns.promtool is not None and not (ns.promtool.is_file() and os.access(ns.promtool, os.X_OK)):
        raise CommandError(f"--promtool {str(ns.promtool)!r} is not an executable file; give the path of promtool itself")
    problem = _argument_problem(ns)
    if problem is not None:
        raise CommandError(problem)
    return _run(ns)


def main(argv: list[str] | None = None) -> int:
    """Run ``outcome-telemetry demo`` with ``argv`` (everything after ``demo``)."""
    return dispatch(build_parser(), execute, sys.argv[1:] if argv is None else argv)


def _run(ns: argparse.Namespace) -> int:
    modes = list(MODES) if ns.mode == "both" else [ns.mode]
    try:
        with writing("--out", ns.out, within=True):  # the run creates --out: /proc/x fails only then
            result = run_crew(
                ns.out,
                scenarios=ns.scenario,
                modes=modes,
                seed=ns.seed,
                agents=ns.agents,
                steps=ns.steps,
                metrics_port=ns.metrics_port if ns.serve else None,
                progress=stderr_progress(),
                keep_runtime=ns.serve,
                store=ns.store,
            )
    except ValueError as exc:  # ConfigurationError (a bad --store) is a TelemetryError: exit 2 as well
        raise CommandError(str(exc)) from None
    if result.runtime is not None:
        result.runtime.force_flush()
    with open_traces([result.traces_dir]) as forensics:
        rows = forensics.answers()
        html_report = write_html(forensics, result.out_dir / "report.html", answers=rows)
    findings = Findings(rows, score(result.manifest, rows))
    alerts: list[FiringAlert] | None = None
    skipped = "--no-alerts" if ns.no_alerts else None
    if not ns.no_alerts and result.registry is not None:
        try:
            alerts = would_fire(samples_from_registry(result.registry), promtool=ns.promtool)
        except ConfigurationError as exc:
            skipped = str(exc)
    if ns.format == "json":
        print(json.dumps(_summary(result, findings, alerts, skipped), indent=2, default=str))
    else:
        print_report(result, findings, alerts, skipped, sys.stdout)
        print(f"HTML report: {html_report}")
        print(audit_summary())
    ok = findings.score.precision == 1.0 and findings.score.recall == 1.0
    if ns.serve and result.runtime is not None:
        try:  # the instructions inside the try: a Ctrl-C right after they print is a clean stop too
            print(_serve_instructions(result), flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            result.runtime.shutdown()
    return EXIT_OK if ok else EXIT_FINDINGS


def _summary(result: CrewResult, findings: Findings, alerts: list[FiringAlert] | None, skipped: str | None) -> dict[str, Any]:
    return {
        "seed": result.manifest.seed,
        "traces_dir": str(result.traces_dir),
        "manifest": str(result.manifest_path),
        "seconds": round(result.seconds, 3),
        "precision": findings.score.precision,
        "recall": findings.score.recall,
        "missed": [{"scenario": s, "mode": m, "question": e.question, "match": dict(e.match), "verdict": e.verdict}
                   for s, m, e in findings.score.missed],
        "unexplained": [{"question": q, "row": row} for q, row in findings.score.unexplained],
        "findings": {q: len(rows) for q, rows in findings.rows.items()},
        "verdicts": tally(findings.rows),
        "headline": headline(tally(findings.rows)),
        "incidents": [
            {"scenario": i.scenario, "mode": i.mode, "run_id": i.run_id, "steps": i.steps, "told": i.told, "facts": i.facts}
            for i in result.manifest.incidents
        ],
        "alerts": None if alerts is None else [{"name": a.name, "severity": a.severity, c.LABEL_TOOL: a.tool} for a in alerts],
        "alerts_skipped": skipped,
        "html_report": str(result.out_dir / "report.html"),
    }


if __name__ == "__main__":
    sys.exit(main())

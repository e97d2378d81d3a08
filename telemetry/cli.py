"""The ``outcome-telemetry`` command: forensics over traces, the demo, and where files live."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._command import command_parser
from .runtime.resources import data_dir

__all__ = ["main"]

DESCRIPTION = """\
Make the failures that look like success visible: transport ok, outcome not ok.

commands:
  forensics   find divergent reads, lost updates, dropped constraints, stale sends ... in
              OTLP JSON trace files (run 'outcome-telemetry forensics --help')
  watch       continuous forensics: follow trace files, count new findings on /metrics
              for Prometheus (run 'outcome-telemetry watch --help')
  audit       the six yeses (scoped, idempotent, version-bound, previewable, read-back
              verified, observable) and the schema lint, for Python tools, MCP servers and
              traces (run 'outcome-telemetry audit --help')
  demo        run the scripted crew: every failure story, guarded and legacy, then the findings
  quickstart  a one-second example: three tools, real spans and counters (writes ./quickstart-output)
  metrics-serve DIR
              one /metrics summing every worker process that writes to DIR
              (PROMETHEUS_MULTIPROC_DIR; run 'outcome-telemetry metrics-serve --help')
  paths       print where the shipped SQL queries, Grafana dashboards and alert rules are
"""


def _paths() -> int:
    for kind in ("queries", "dashboards", "alerts"):
        print(f"{kind}: {data_dir(kind)}")  # type: ignore[arg-type]
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = command_parser("", DESCRIPTION)
    parser.add_argument("command", nargs="?", choices=["forensics", "watch", "audit", "demo", "quickstart", "metrics-serve", "paths"], help=argparse.SUPPRESS)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    if not args or args[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if args[0] == "--version":
        from . import __version__

        print(__version__)
        return 0
    command, rest = args[0], args[1:]
    if command == "forensics":
        from .forensics.cli import main as forensics_main

        return forensics_main(rest)
    if command == "watch":
        from .forensics.watch.cli import main as watch_main

        return watch_main(rest)
    if command == "audit":
        from .audit.cli import main as audit_main

        return audit_main(rest)
    if command == "demo":
        from .demo.cli import main as demo_main

        return demo_main(rest)
    if command == "quickstart":
        sub = argparse.ArgumentParser(
            prog="outcome-telemetry quickstart",
            description="Run the three-tool example (about a second): one write whose read-back matched, one "
            "200 that did not persist as sent, one bulk update that changed the wrong set. It prints the "
            "counters and the forensics command to run next, and writes its trace file to --out/traces/, "
            "a folder it creates (by default in the current folder).",
        )
        sub.add_argument("--out", type=Path, default=Path("quickstart-output"),
                         help="folder to write traces/ into (default: ./%(default)s)")
        ns = sub.parse_args(rest)
        from .demo.quickstart import run

        run(ns.out)
        return 0
    if command == "metrics-serve":
        from .runtime.metrics_serve import main as metrics_serve_main

        return metrics_serve_main(rest)
    if command == "paths":
        return _paths()
    parser.error(f"unknown command {command!r}; choose from forensics, watch, audit, demo, quickstart, metrics-serve, paths")
    return 2  # unreachable: parser.error exits


if __name__ == "__main__":
    sys.exit(main())

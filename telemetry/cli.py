"""The ``outcome-telemetry`` command: one entry for every subcommand.

Each subcommand is a row of :data:`COMMANDS`: where its ``build_parser()`` and ``execute(args)``
live and which extra it needs. The module is imported only when its subcommand runs, after its
extra is checked, so a plain install answers every ``--help`` and names the extra a command
lacks in one line (exit 2) instead of an ``ImportError``; every subcommand then runs through
:func:`telemetry._command.dispatch` (the same exit codes, unknown flags refused, a quiet end on a
closed stdout, one line and exit 2 for bad input, a traceback and exit 3 only for a bug).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ._command import (
    EXIT_INPUT,
    EXIT_OK,
    CommandError,
    command_parser,
    dispatch,
    make_folder,
    output_folder,
    parse,
    run,
)
from ._extras import require

__all__ = ["COMMANDS", "Command", "build_parser", "command", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one line of help, and where it lives."""

    name: str
    summary: str
    module: str
    """The module holding its parser and its body (imported only to run or describe it)."""
    extra: str | None = None
    """The extra it needs, named when missing (``pip install ...[extra]``)."""
    needs: str | None = None
    """The module the extra provides, checked before ``module`` is imported."""
    parser: str = "build_parser"
    execute: str = "execute"

    @property
    def prog(self) -> str:
        return f"outcome-telemetry {self.name}"

    def missing(self) -> str | None:
        """Why this command cannot run here (its extra is not installed), or None."""
        if self.needs is None or self.extra is None:
            return None
        try:
            require(self.needs, extra=self.extra, needed_for="this command", error=CommandError)
        except CommandError as exc:
            return str(exc)
        return None

    def build_parser(self) -> argparse.ArgumentParser:
        """The subcommand's own parser (its module imported; its extra must be installed)."""
        return cast(Callable[[], argparse.ArgumentParser], getattr(importlib.import_module(self.module), self.parser))()

    def body(self) -> Callable[[argparse.Namespace], int]:
        return cast(Callable[[argparse.Namespace], int], getattr(importlib.import_module(self.module), self.execute))


COMMANDS: tuple[Command, ...] = (
    Command("forensics", "find divergent reads, lost updates, dropped constraints, stale sends ... in OTLP JSON "
            "trace files or a Collector's ClickHouse table", "telemetry.forensics._cli", "forensics", "duckdb"),
    Command("watch", "continuous forensics: follow trace files, count new findings on /metrics for Prometheus",
            "telemetry.forensics.watch._cli", "forensics", "duckdb"),
    Command("audit", "the six checks (scoped, idempotent, version_bound, previewable, readback_verified, "
            "semantically_observable) and the schema lint, for Python tools, MCP servers and traces",
            "telemetry.audit._cli"),
    Command("demo", "run the scripted crew: every failure story, guarded and legacy, then the findings",
            "telemetry.demo._cli", "demo", "duckdb"),
    Command("quickstart", "a one-second example: three tools, real spans and counters (writes ./quickstart-output)",
            "telemetry.cli", parser="quickstart_parser", execute="quickstart"),
    Command("metrics-serve", "one /metrics summing every worker process that writes to DIR (PROMETHEUS_MULTIPROC_DIR)",
            "telemetry.runtime._metrics_serve"),
    Command("paths", "print where the shipped SQL queries, Grafana dashboards and alert rules are",
            "telemetry.cli", parser="paths_parser", execute="paths"),
)


def command(name: str) -> Command:
    """The row of :data:`COMMANDS` called ``name`` (KeyError when there is none)."""
    for row in COMMANDS:
        if row.name == name:
            return row
    raise KeyError(name)


def _description() -> str:
    width = max(len(c.name) for c in COMMANDS)
    lines = ["Make the failures that look like success visible: transport ok, outcome not ok.", "",
             "commands (run 'outcome-telemetry COMMAND --help' for each):"]
    for c in COMMANDS:
        extra = f" [the {c.extra} extra]" if c.extra else ""
        lines.append(f"  {c.name.ljust(width)}  {c.summary}{extra}")
    return "\n".join(lines)


_EPILOG = """\
exit status, the same for every command: 0 done; 1 findings or a gate met (--fail-on, the demo's
score); 2 bad input or usage (one line on stderr says which, a missing extra included); 3 a bug
(traceback on stderr). A closed stdout (`... | head`) ends quietly with 0.
"""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: the subcommand's name, then everything it is given."""
    parser = command_parser("", _description(), _EPILOG)
    from . import __version__

    parser.add_argument("--version", action="version", version=__version__, help="print the version and exit")
    parser.add_argument("command", nargs="?", choices=[c.name for c in COMMANDS], metavar="COMMAND",
                        help="one of: " + ", ".join(c.name for c in COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="...", help="the command's own arguments")
    return parser


def _unavailable_help(row: Command, reason: str) -> int:
    """``--help`` of a command whose extra is missing: what it does and the install line (exit 0)."""
    print(f"usage: {row.prog} ...\n\n{row.summary[:1].upper()}{row.summary[1:]}.\n\n{reason}\n"
          f"Once it is installed, '{row.prog} --help' lists every option.")
    return EXIT_OK


def _run_command(row: Command, argv: Sequence[str]) -> int:
    reason = row.missing()
    if reason is not None:
        if any(a in ("-h", "--help") for a in argv):
            return run(lambda: _unavailable_help(row, reason), prog=row.prog)
        print(f"{row.prog}: error: {reason}", file=sys.stderr)
        return EXIT_INPUT
    return dispatch(row.build_parser(), row.body(), argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args:
        return run(lambda: _help(parser), prog=parser.prog)
    parsed = _parse_top(parser, args)
    if isinstance(parsed, int):  # --help, --version, an unknown command or flag
        return parsed
    if parsed.command is None:  # only options that are not commands' (e.g. `--`)
        return run(lambda: _help(parser), prog=parser.prog)
    return _run_command(command(parsed.command), parsed.args)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_OK


def _parse_top(parser: argparse.ArgumentParser, args: Sequence[str]) -> argparse.Namespace | int:
    """``args`` parsed by the top-level parser, or its exit code (a closed stdout after ``--help`` is 0)."""
    result: list[argparse.Namespace] = []

    def body() -> int:
        parsed = parse(parser, args)
        if isinstance(parsed, int):
            return parsed
        result.append(parsed)
        return EXIT_OK

    code = run(body, prog=parser.prog)
    return result[0] if result else code


# --- the two small commands that live here ----------------------------------------------------

def quickstart_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "quickstart",
        "Run the three-tool example (about a second): one write whose read-back matched, one 200\n"
        "that did not persist as sent, one bulk update that changed the wrong set. It prints the\n"
        "counters and the forensics command to run next, and writes its trace file to --out/traces/,\n"
        "a folder it creates (by default in the current folder).")
    parser.add_argument("--out", type=output_folder, default=Path("quickstart-output"), metavar="DIR",
                        help="folder to write traces/ into (default: ./%(default)s)")
    return parser


def quickstart(args: argparse.Namespace) -> int:
    from .demo._quickstart import run as run_quickstart

    run_quickstart(make_folder("--out", args.out))
    return EXIT_OK


def paths_parser() -> argparse.ArgumentParser:
    return command_parser("paths", "Print where the shipped SQL queries, Grafana dashboards and alert rules are,\n"
                                   "one 'kind: folder' line each.")


def paths(args: argparse.Namespace) -> int:
    from .runtime._resources import data_dir

    for kind in ("queries", "dashboards", "alerts"):
        print(f"{kind}: {data_dir(kind)}")  # type: ignore[arg-type]
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

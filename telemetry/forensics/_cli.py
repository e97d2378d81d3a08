"""``outcome-telemetry forensics``: the on-call command line over trace files, verbs then nouns.

    outcome-telemetry forensics report traces/                # every question, summarised
    outcome-telemetry forensics run divergent_reads traces/   # one question's rows
    outcome-telemetry forensics list                          # the questions
    outcome-telemetry forensics ingest traces/ --to pq/       # Parquet once, for scale
    outcome-telemetry forensics report --clickhouse https://reader@ch:8443/otel --last 6h

Exit status: 0 done, 1 a happened or unknown finding at or above ``--fail-on``, 2 bad input or
usage, 3 a bug.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from .._command import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    command_parser,
    dispatch,
    make_folder,
    output_file,
    output_folder,
    writing,
)
from ..exceptions import ForensicsInputError
from ._api import Forensics, open_clickhouse, open_traces
from ._ingest import ingest
from ._loading import MAX_LINE_BYTES, Progress, stderr_progress
from ._peers import add_arguments as add_peer_arguments
from ._peers import arguments_of as peer_arguments
from ._questions import CRITICAL, QUESTION_NAMES, WARNING, Question, all_questions, question
from ._report import Format, format_answer
from ._verdicts import gated, verdict_counts
from .clickhouse._options import add_arguments as add_clickhouse_arguments
from .clickhouse._options import quiet_driver_logs, refuse_without_clickhouse
from .html import validate_trace_url, write_html

__all__ = ["EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "FAIL_ON", "FORMATS", "build_parser",
           "byte_count", "execute", "main"]

FORMATS = ("text", "json", "csv")
"""``--format`` values; ``text`` is the human one, as in every command."""
NEVER = "never"
FAIL_ON = (CRITICAL, WARNING, NEVER)
"""``--fail-on`` levels, as the audit's: exit 1 on a critical finding, on a warning or worse, or never."""
_RENDER: dict[str, Format] = {"text": "table", "json": "json", "csv": "csv"}

_EPILOG = """\
PATHS are OTLP JSON-lines files (.jsonl/.json/.ndjson, optionally .gz/.zst), directories
(searched recursively), globs, or a directory written by `ingest` (Parquet).
Run `outcome-telemetry forensics list` for the questions; docs/forensics.md explains each.
Instead of PATHS, --clickhouse URL reads a Collector's otel_traces table (the password from
$CLICKHOUSE_PASSWORD, never the command line); see `outcome-telemetry forensics report --help`.

exit status: 0 done; 1 a finding at or above --fail-on (critical or warning) whose verdict is
happened or unknown (prevented rows and records such as waivers and refusals never); 2 bad input
or usage; 3 an unexpected failure (traceback on stderr).
A closed stdout (`... | head`) ends quietly with 0.
"""


def byte_count(text: str) -> int:
    """``--max-line-bytes``: a positive integer, optionally with a K/M/G (binary) suffix."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte count (e.g. 16777216 or 64M)")
    return int(digits) * scale


def _inputs(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("paths", nargs="+" if required else "*", metavar="PATHS",
                        help="trace files, directories or globs")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip malformed lines (reported with file and line) instead of failing; "
                             "with --clickhouse, malformed rows (reported with trace and span id)")
    parser.add_argument("--skip-unreadable", action="store_true",
                        help="skip a folder or trace file this user cannot read instead of refusing the run; "
                             "each skip is counted and named in the evidence and the warnings, and every "
                             "answer carries a note that their spans are missing")
    parser.add_argument("--max-line-bytes", type=byte_count, default=MAX_LINE_BYTES, metavar="N",
                        help="longest line to read, in bytes (K/M/G suffixes; default 16M); longer lines "
                             "are refused naming the line, or skipped with --skip-bad-lines")
    parser.add_argument("--memory-limit", type=byte_count, default=None, metavar="N",
                        help="DuckDB's memory limit, in bytes (K/M/G suffixes; default 600M; what does not fit "
                             "spills to a temporary folder); parsing a line takes about 20 times its length, so "
                             "a very long line is read with --max-line-bytes and --memory-limit raised together")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")


def _answers(parser: argparse.ArgumentParser) -> None:
    _inputs(parser, required=False)
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    parser.add_argument("--fail-on", choices=FAIL_ON, default=NEVER,
                        help="exit 1 on a critical finding, on a warning or worse, or never (the default); "
                             "for CI. Only rows whose verdict is happened or unknown count: a prevented row "
                             "(refused, rolled back, deduplicated) never fails the run, and is never critical")
    add_clickhouse_arguments(parser)
    add_peer_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so the top-level CLI, the tests and the docs can reuse it)."""
    parser = command_parser(
        "forensics",
        "Find what the guards did not prevent: divergent reads, lost updates, dropped constraints, "
        "silent failures, stale sends, read-back mismatches, ... in OTLP JSON-lines traces.",
        _EPILOG)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    report_parser = commands.add_parser(
        "report", help="run every question and print a summary (--html for a page)",
        description="Run every question; print what was found by severity, how many, the worst "
                    "examples, what to do next and the command for the rows. --html FILE also writes "
                    "one self-contained HTML page (no script, nothing fetched) with chain diagrams, "
                    "state-key timelines and per-tool bars.")
    _answers(report_parser)
    report_parser.add_argument("--html", type=output_file, metavar="FILE",
                               help="also write the report as one self-contained HTML file")
    report_parser.add_argument("--trace-url", metavar="TEMPLATE",
                               help="with --html: link trace ids through this URL, which must contain {trace_id} "
                                    "(e.g. http://localhost:16686/trace/{trace_id} for Jaeger)")
    run_parser = commands.add_parser(
        "run", help="run one question and print its rows",
        description="Run one question (see `outcome-telemetry forensics list`) and print its rows, "
                    "with the caveats the evidence puts on them.")
    run_parser.add_argument("question", choices=QUESTION_NAMES, metavar="QUESTION",
                            help="the question's name (`forensics list` shows them)")
    _answers(run_parser)
    list_parser = commands.add_parser(
        "list", help="the questions, one line each (with a QUESTION: its full description)",
        description="Print every question with its one-line description; with QUESTION names, print "
                    "each one's whole header instead (what it asks, its scope, its columns, an example).")
    list_parser.add_argument("questions", nargs="*", type=_question_name, metavar="QUESTION",
                             help="questions to describe in full")
    ingest_parser = commands.add_parser(
        "ingest", help="convert JSON lines to Parquet (incremental)",
        description="Convert trace files to Parquet parts in DIR once; files already ingested (same "
                    "path, size and mtime) are skipped. Then run questions on DIR.")
    _inputs(ingest_parser, required=True)
    ingest_parser.add_argument("--to", required=True, type=output_folder, metavar="DIR",
                               help="output directory for the Parquet parts")
    return parser


def _question_name(text: str) -> str:
    """A question's name (``nargs="*"`` cannot take ``choices``: argparse checks the empty default)."""
    if text not in QUESTION_NAMES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a question; choose from {', '.join(QUESTION_NAMES)}")
    return text


def _list(names: Sequence[str]) -> str:
    if names:
        return "\n\n".join(question(name).header for name in names)
    width = max(len(n) for n in QUESTION_NAMES)
    return "\n".join(f"{q.name.ljust(width)}  {q.description}" for q in all_questions())


def _fails(found: Sequence[tuple[Question, Mapping[str, int]]], fail_on: str) -> bool:
    """Whether a finding question has a happened or unknown row at or above ``fail_on`` (records
    and prevented rows never count; a row's severity follows its verdict)."""
    levels = {CRITICAL: (CRITICAL,), WARNING: (CRITICAL, WARNING)}.get(fail_on, ())
    return any(q.is_finding and gated(q.severity, verdicts, levels) for q, verdicts in found)


def execute(args: argparse.Namespace) -> int:
    """The body of ``outcome-telemetry forensics``, on parsed arguments."""
    if args.command == "list":
        print(_list(args.questions))
        return EXIT_OK
    progress: Progress | None = None if args.quiet else stderr_progress
    if args.command == "ingest":
        make_folder("--to", args.to)
        result = ingest(args.paths, args.to, skip_bad_lines=args.skip_bad_lines, progress=progress,
                        max_line_bytes=args.max_line_bytes, skip_unreadable=args.skip_unreadable,
                        memory_limit=args.memory_limit)
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(f"ingested {len(result.ingested)} file(s), {result.spans:,} spans, into {result.directory}; "
              f"{len(result.unchanged)} unchanged file(s) skipped")
        return EXIT_OK
    if args.command == "report" and args.trace_url is not None:
        if not args.html:
            raise ForensicsInputError("--trace-url needs --html FILE (links are only made in the HTML page)")
        validate_trace_url(args.trace_url)
    if args.command == "report" and args.html:
        make_folder("--html", args.html.parent, shown=args.html)  # before the work, not after it
    with _open(args, progress) as traces:
        for warning in traces.evidence.warnings():
            print(f"warning: {warning}", file=sys.stderr)
        if args.command == "report":
            answers = traces.answers(progress) if args.html else None  # the page needs every row
            report = traces.report(progress=progress, answers=answers)
            print(report.render(_RENDER[args.format]))
            if args.html:
                with writing("--html", args.html):
                    written = write_html(traces, args.html, trace_url=args.trace_url, answers=answers)
                print(f"HTML report: {written}", file=sys.stderr)
            found = [(s.question, s.verdicts) for s in report.sections]
        else:
            q = question(args.question)
            rows = traces.run(q.name)
            print(format_answer(rows, traces.columns(q.name), _RENDER[args.format], q, traces.evidence))
            found = [(q, verdict_counts(rows))]
    return EXIT_FINDINGS if _fails(found, args.fail_on) else EXIT_OK


def _open(args: argparse.Namespace, progress: Progress | None) -> Forensics:
    """The traces the arguments name: files, or a ClickHouse table (exactly one of them)."""
    if args.clickhouse is None:
        if not args.paths:
            raise ForensicsInputError("no traces named; pass trace files or directories, or --clickhouse URL")
        refuse_without_clickhouse(args)
        return open_traces(args.paths, skip_bad_lines=args.skip_bad_lines, progress=progress,
                           max_line_bytes=args.max_line_bytes, skip_unreadable=args.skip_unreadable,
                           memory_limit=args.memory_limit, **peer_arguments(args))
    if args.paths:
        raise ForensicsInputError("give trace PATHS or --clickhouse, not both")
    if args.skip_unreadable or args.memory_limit is not None:
        flag = "--skip-unreadable" if args.skip_unreadable else "--memory-limit"
        raise ForensicsInputError(f"{flag} applies to trace paths, not to --clickhouse; leave it out")
    quiet_driver_logs()  # a failure is this command's one named line
    return open_clickhouse(args.clickhouse, table=args.table, since=args.since, until=args.until, last=args.last,
                           service=args.service, max_spans=args.max_spans, password_env=args.password_env,
                           progress=progress, skip_bad_rows=args.skip_bad_lines, **peer_arguments(args))


def main(argv: Sequence[str]) -> int:
    """Run ``outcome-telemetry forensics`` with ``argv`` (everything after ``forensics``)."""
    return dispatch(build_parser(), execute, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

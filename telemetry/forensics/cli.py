"""``outcome-telemetry forensics``: the on-call command line over trace files.

    outcome-telemetry forensics report traces/            # every question, summarised
    outcome-telemetry forensics divergent_reads traces/   # one question's rows
    outcome-telemetry forensics ingest traces/ --to pq/   # Parquet once, for scale
    outcome-telemetry forensics --list                    # the questions
    outcome-telemetry forensics report --clickhouse https://reader@ch:8443/otel --last 6h

Exit status: 0 done, 1 findings with ``--fail-on-findings``, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .._command import EXIT_FINDINGS, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, command_parser, parse, run
from ..exceptions import ForensicsInputError
from .api import Forensics, open_clickhouse, open_traces
from .clickhouse.options import add_arguments as add_clickhouse_arguments
from .html import validate_trace_url, write_html
from .ingest import ingest
from .loading import MAX_LINE_BYTES, Progress, stderr_progress
from .questions import QUESTION_NAMES, all_questions, question
from .report import FORMATS, format_answer

__all__ = ["EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "build_parser", "main"]

# Exit 3 (EXIT_INTERNAL) is distinct from 1, so --fail-on-findings in CI never mistakes a crash
# for findings.

_EPILOG = """\
PATHS are OTLP JSON-lines files (.jsonl/.json/.ndjson, optionally .gz/.zst), directories
(searched recursively), globs, or a directory written by `ingest` (Parquet).
Run `outcome-telemetry forensics --list` for the questions; docs/forensics.md explains each.
Instead of PATHS, --clickhouse URL reads a Collector's otel_traces table (the password from
$CLICKHOUSE_PASSWORD, never the command line); see `outcome-telemetry forensics report --help`.

exit status: 0 done; 1 findings (with --fail-on-findings); 2 bad input or usage;
3 an unexpected failure (traceback on stderr). A closed stdout (`... | head`) ends quietly with 0.
"""


def byte_count(text: str) -> int:
    """``--max-line-bytes``: a positive integer, optionally with a K/M/G (binary) suffix."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte count (e.g. 16777216 or 64M)")
    return int(digits) * scale


def _common(parser: argparse.ArgumentParser, *, findings: bool = True) -> None:
    parser.add_argument("paths", nargs="+" if not findings else "*", metavar="PATHS",
                        help="trace files, directories or globs")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip malformed lines (reported with file and line) instead of failing; "
                             "with --clickhouse, malformed rows (reported with trace and span id)")
    parser.add_argument("--max-line-bytes", type=byte_count, default=MAX_LINE_BYTES, metavar="N",
                        help="longest line to read, in bytes (K/M/G suffixes; default 16M); longer lines "
                             "are refused naming the line, or skipped with --skip-bad-lines")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    if findings:
        parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
        parser.add_argument("--fail-on-findings", action="store_true",
                            help="exit 1 when any question reports a problem (for CI)")
        add_clickhouse_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so the top-level CLI and docs can reuse it)."""
    parser = command_parser(
        "forensics",
        "Find what the guards did not prevent: divergent reads, lost updates, dropped constraints, "
        "200s with a bad outcome, stale sends, read-back mismatches, ... in OTLP JSON-lines traces.",
        _EPILOG)
    parser.add_argument("--list", action="store_true", help="list the questions with one-line descriptions")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    report_parser = commands.add_parser(
        "report", help="run every question and print a summary (--html for a page)",
        description="Run every question; print what was found by severity, how many, the worst "
                    "examples, what to do next and the command for the rows. --html FILE also writes "
                    "one self-contained HTML page (no script, nothing fetched) with chain diagrams, "
                    "state-key timelines and per-tool bars.")
    _common(report_parser)
    report_parser.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML file")
    report_parser.add_argument("--trace-url", metavar="TEMPLATE",
                               help="with --html: link trace ids through this URL, which must contain {trace_id} "
                                    "(e.g. http://localhost:16686/trace/{trace_id} for Jaeger)")
    ingest_parser = commands.add_parser(
        "ingest", help="convert JSON lines to Parquet (incremental)",
        description="Convert trace files to Parquet parts in DIR once; files already ingested (same "
                    "path, size and mtime) are skipped. Then run questions on DIR.")
    _common(ingest_parser, findings=False)
    ingest_parser.add_argument("--to", required=True, metavar="DIR", help="output directory for the Parquet parts")
    for q in all_questions():
        _common(commands.add_parser(q.name, help=q.description, description=q.header,
                                    formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def _list() -> str:
    width = max(len(n) for n in QUESTION_NAMES)
    return "\n".join(f"{q.name.ljust(width)}  {q.description}" for q in all_questions())


def _run(args: argparse.Namespace) -> int:
    progress: Optional[Progress] = None if args.quiet else stderr_progress
    if args.command == "ingest":
        result = ingest(args.paths, args.to, skip_bad_lines=args.skip_bad_lines, progress=progress,
                        max_line_bytes=args.max_line_bytes)
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(f"ingested {len(result.ingested)} file(s), {result.spans:,} spans, into {result.directory}; "
              f"{len(result.unchanged)} unchanged file(s) skipped")
        return EXIT_OK
    with _open(args, progress) as traces:
        for warning in traces.evidence.warnings():
            print(f"warning: {warning}", file=sys.stderr)
        if args.command == "report":
            if args.trace_url is not None:
                if not args.html:
                    raise ForensicsInputError("--trace-url needs --html FILE (links are only made in the HTML page)")
                validate_trace_url(args.trace_url)
            answers = traces.answers(progress) if args.html else None  # the page needs every row
            report = traces.report(progress=progress, answers=answers)
            print(report.render(args.format))
            if args.html:
                written = write_html(traces, args.html, trace_url=args.trace_url, answers=answers)
                print(f"HTML report: {written}", file=sys.stderr)
            findings = report.findings
        else:
            q = question(args.command)
            rows = traces.run(q.name)
            print(format_answer(rows, traces.columns(q.name), args.format, q, traces.evidence))
            findings = len(rows) if q.is_finding else 0
    return EXIT_FINDINGS if args.fail_on_findings and findings else EXIT_OK


def _open(args: argparse.Namespace, progress: Optional[Progress]) -> Forensics:
    """The traces the arguments name: files, or a ClickHouse table (exactly one of them)."""
    if args.clickhouse is None:
        if not args.paths:
            raise ForensicsInputError("no traces named; pass trace files or directories, or --clickhouse URL")
        return open_traces(args.paths, skip_bad_lines=args.skip_bad_lines, progress=progress,
                           max_line_bytes=args.max_line_bytes)
    if args.paths:
        raise ForensicsInputError("give trace PATHS or --clickhouse, not both")
    return open_clickhouse(args.clickhouse, table=args.table, since=args.since, until=args.until, last=args.last,
                           service=args.service, max_spans=args.max_spans, password_env=args.password_env,
                           progress=progress, skip_bad_rows=args.skip_bad_lines)


def main(argv: Sequence[str]) -> int:
    """Run ``outcome-telemetry forensics`` with ``argv`` (everything after ``forensics``)."""
    parser = build_parser()
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    if args.list:
        print(_list())
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    return run(lambda: _run(args), input_errors=(ForensicsInputError,), prefix="error: ", what="forensics")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

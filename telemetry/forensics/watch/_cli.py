"""``outcome-telemetry watch``: continuous forensics, served to Prometheus.

    outcome-telemetry watch traces/ --metrics-port 9465 --state /var/lib/ot/watch.json
    outcome-telemetry watch --clickhouse https://reader@ch:8443/otel --last 1h --state watch.json

Exit status: 0 stopped by SIGINT or SIGTERM, 2 bad input or usage, 3 an unexpected failure.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from ... import conventions as c
from ..._command import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    CommandError,
    command_parser,
    dispatch,
    make_folder,
    output_file,
    server_stdout,
)
from .._cli import byte_count
from .._loading import MAX_LINE_BYTES
from .._peers import add_arguments as add_peer_arguments
from .._peers import options_from
from ..clickhouse._options import add_arguments as add_clickhouse_arguments
from ..clickhouse._options import quiet_driver_logs, refuse_without_clickhouse
from ._clickhouse import ClickHouseSource, ClickHouseWindow
from ._watcher import PassResult, Watcher, WatchOptions

__all__ = ["DEFAULT_PORT", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "build_parser", "duration", "execute", "main"]

DEFAULT_PORT = 9465
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)")

_EPILOG = f"""\
Each pass reads the new complete lines of the trace files (a partial last line waits for its
end; new files and rotated ones are picked up), runs the questions over the window of recent
spans, and counts on /metrics each new finding once in {c.METRIC_FORENSIC_FINDINGS_TOTAL}{{question}}.
Only rows whose verdict is {c.VERDICT_HAPPENED} are counted (the failure went through); {c.VERDICT_PREVENTED}
rows (refused, rolled back, deduplicated, told) and {c.VERDICT_UNKNOWN} ones (the evidence cannot tell;
`forensics report` lists them) are not.
Health: {c.METRIC_WATCH_LINES_READ_TOTAL}, {c.METRIC_WATCH_BAD_LINES_TOTAL},
{c.METRIC_WATCH_LAG_SECONDS}, {c.METRIC_WATCH_PASS_DURATION}.

Without --state, offsets and counted findings live in memory only: a restart reads every file
again and counts its findings again. With --state FILE they are saved after every pass (and the
window in FILE.window.duckdb), so a restart goes on where it stopped.

With --clickhouse URL instead of PATHS, nothing is followed: every pass reads the runs with a
tool span in the --last DURATION (now minus DURATION to now) from the table the Collector's
clickhouseexporter writes, each run whole (with the spans that parent its tool spans), through
the same reader as `forensics --clickhouse` (--max-spans; the password from $CLICKHOUSE_PASSWORD
or --password-env, never the command line). Malformed rows are skipped, named on stderr and
counted once in {c.METRIC_WATCH_BAD_LINES_TOTAL};
{c.METRIC_WATCH_LINES_READ_TOTAL} counts the rows each pass fetched.
A server that cannot be reached, a refused password or a missing table fails the pass: one
error line naming it, counted in {c.METRIC_WATCH_PASS_FAILURES_TOTAL}, and the pass
is retried at the next interval. --state keeps the counted findings (after a restart the window
is read from ClickHouse again, and nothing counted before is counted again).

--last is the same window as `forensics --last`, re-read every pass: the spans of the last
DURATION (from files, counted back from the newest span read; a run leaves the window whole).
There is no --since/--until: a watcher's window slides with time, it has no fixed ends.
DURATION is seconds, or a number with s, m, h or d (90s, 15m, 1h). SIGINT or SIGTERM stops
after the pass in progress, with exit status 0. The alert rule {c.ALERT_FORENSIC_FINDING} and its
runbook: docs/alerts.md.
"""


def duration(text: str) -> float:
    """``--interval``/``--last``/``--settle``: seconds, or a number with s/m/h/d."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 15, 90s, 15m, 1h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number 0-65535 (0 picks a free one)")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "watch",
        "Follow OTLP JSON-lines trace files (or read a Collector's ClickHouse otel_traces table) and "
        "turn lost updates, dropped constraints, stale sends and double executions into Prometheus "
        "counters within a pass.",
        _EPILOG)
    parser.add_argument("paths", nargs="*", metavar="PATHS",
                        help="trace files, directories (searched recursively, may start empty) or globs "
                             "(or --clickhouse URL instead)")
    parser.add_argument("--metrics-port", type=_port, default=DEFAULT_PORT, metavar="P",
                        help=f"serve /metrics on this port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--metrics-addr", default="127.0.0.1", metavar="ADDR",
                        help="address to serve /metrics on (default 127.0.0.1)")
    parser.add_argument("--interval", type=duration, default=15.0, metavar="SECONDS",
                        help="time between passes (default 15s)")
    parser.add_argument("--last", type=duration, default=3600.0, metavar="DURATION",
                        help="the window each pass judges: the last DURATION of spans (default 1h: a crew "
                             "run and more); it slides with every pass")
    parser.add_argument("--settle", type=duration, default=10.0, metavar="DURATION",
                        help="how long a finding must hold before it counts (default 10s: longer than "
                             "an exporter's flush delay)")
    parser.add_argument("--state", type=output_file, metavar="FILE",
                        help="keep offsets and counted findings here across restarts (see below)")
    parser.add_argument("--max-line-bytes", type=byte_count, default=MAX_LINE_BYTES, metavar="N",
                        help="longest line to read (K/M/G suffixes; default 16M); longer lines are skipped")
    parser.add_argument("--quiet", "-q", action="store_true", help="no per-pass progress on stderr")
    add_peer_arguments(parser, content=False)
    add_clickhouse_arguments(parser, window=False)
    return parser


def _progress(result: PassResult) -> None:
    if result.lines or result.new or result.evicted:
        print(f"pass: {result.lines:,} line(s), {result.spans:,} span(s) read, {result.bad_lines} bad; "
              f"window {result.window_spans:,} span(s) ({result.evicted:,} evicted); "
              f"{len(result.new)} new finding(s) in {result.seconds:.2f} s", file=sys.stderr, flush=True)


def execute(args: argparse.Namespace) -> int:
    """Watch until SIGINT or SIGTERM (the body of ``outcome-telemetry watch``, on parsed arguments)."""
    if args.interval <= 0 or args.last <= 0:
        raise CommandError("--interval and --last must be more than 0")
    if bool(args.paths) == (args.clickhouse is not None):
        raise CommandError("give trace PATHS or --clickhouse URL (exactly one of them)")
    if args.state is not None:
        make_folder("--state", args.state.parent, shown=args.state)
    if args.clickhouse is not None:
        quiet_driver_logs()  # each failed pass is one named line
    else:
        refuse_without_clickhouse(args, window=False)
    source = None if args.clickhouse is None else ClickHouseSource(
        args.clickhouse, table=args.table, service=args.service, max_spans=args.max_spans,
        password_env=args.password_env)
    peer_options = options_from(args.tool_spans or None, args.result_shape or None)
    options = WatchOptions(paths=tuple(args.paths), interval=args.interval, window=args.last,
                           settle=args.settle, state=args.state, max_line_bytes=args.max_line_bytes,
                           clickhouse=source, peer_options=peer_options)
    watcher = Watcher(options, out=server_stdout())  # a closed stdout silences the lines, /metrics goes on
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _serve(args, watcher, stop)
    finally:
        watcher.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str]) -> int:
    """Run ``outcome-telemetry watch`` with ``argv`` until SIGINT or SIGTERM."""
    return dispatch(build_parser(), execute, argv)


def _serve(args: argparse.Namespace, watcher: Watcher, stop: threading.Event) -> int:
    """Serve /metrics and run passes until ``stop``; the server is closed whatever happens."""
    from prometheus_client import start_http_server

    from ...runtime._metrics_server import stop_server

    try:
        server, _thread = start_http_server(args.metrics_port, addr=args.metrics_addr, registry=watcher.registry)
    except OSError as exc:
        raise CommandError(f"cannot serve /metrics on {args.metrics_addr}:{args.metrics_port} ({exc}); pass "
                           "another --metrics-port") from None
    try:
        host, port = server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        watched = watcher.window.describe() if isinstance(watcher.window, ClickHouseWindow) else " ".join(args.paths)
        print(f"watching {watched}: /metrics at http://{host}:{port}/metrics, a pass every "
              f"{args.interval:g} s over the last {args.last:g} s", file=sys.stderr, flush=True)
        watcher.run(stop, None if args.quiet else _progress)
        return EXIT_OK
    finally:
        stop_server(server)

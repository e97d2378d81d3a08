"""``outcome-telemetry metrics-serve DIR``: one ``/metrics`` for every worker writing to DIR.

For an application whose workers cannot serve ``/metrics`` themselves (Celery prefork, a job
runner): run this beside them with the same ``PROMETHEUS_MULTIPROC_DIR`` folder and scrape it.
It sums every process's files on each scrape and keeps serving until interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from .._command import EXIT_OK, CommandError, command_parser, dispatch, server_stdout
from ._metrics_server import stop_server
from ._multiprocess import aggregate_registry, resolve

__all__ = ["build_parser", "execute", "main"]

USAGE = """\
Serve the summed metrics of every process writing to DIR (prometheus-client's multiprocess
folder, PROMETHEUS_MULTIPROC_DIR) on http://ADDR:PORT/metrics, until Ctrl-C or SIGTERM
(exit status 0; 2 for a bad folder or a port that cannot be listened on).

example:
  PROMETHEUS_MULTIPROC_DIR=/run/crew-metrics gunicorn -w 4 app:app &
  outcome-telemetry metrics-serve /run/crew-metrics --metrics-port 9464
"""


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number 0-65535 (0 picks a free one)")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("metrics-serve", USAGE)
    parser.add_argument("dir", type=Path, metavar="DIR", help="the multiprocess metrics folder")
    parser.add_argument("--metrics-port", type=_port, default=9464, metavar="P",
                        help="port to serve /metrics on (0 picks one; default: %(default)s)")
    parser.add_argument("--metrics-addr", default="127.0.0.1", metavar="ADDR",
                        help="address to serve /metrics on (default: %(default)s)")
    return parser


def execute(ns: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM (the body of ``outcome-telemetry metrics-serve``)."""
    if not ns.dir.is_dir():
        raise CommandError(f"{ns.dir} is not a folder: give the PROMETHEUS_MULTIPROC_DIR folder the workers write to")
    folder = resolve(ns.dir)  # a ConfigurationError (exit 2) names what is wrong with it
    assert folder is not None
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(ns.metrics_port, addr=ns.metrics_addr, registry=aggregate_registry(folder))
    except OSError as exc:
        raise CommandError(f"cannot listen on {ns.metrics_addr}:{ns.metrics_port}: {exc}; pass another --metrics-port") from None
    port = server.server_address[1]
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        print(f"serving the metrics of {folder} on http://{ns.metrics_addr}:{port}/metrics (Ctrl-C stops)",
              file=server_stdout(), flush=True)  # nobody reading stdout: keep serving, the scraper reads
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(server)
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def main(argv: Sequence[str]) -> int:
    """Run ``outcome-telemetry metrics-serve`` with ``argv`` (everything after ``metrics-serve``)."""
    return dispatch(build_parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``outcome-telemetry metrics-serve DIR``: one ``/metrics`` for every worker writing to DIR.

For an application whose workers cannot serve ``/metrics`` themselves (Celery prefork, a job
runner): run this beside them with the same ``PROMETHEUS_MULTIPROC_DIR`` folder and scrape it.
It sums every process's files on each scrape and keeps serving until interrupted.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from .._command import command_parser
from ..exceptions import ConfigurationError
from .metrics_server import stop_server
from .multiprocess import aggregate_registry, resolve

__all__ = ["main"]

USAGE = """\
Serve the summed metrics of every process writing to DIR (prometheus-client's multiprocess
folder, PROMETHEUS_MULTIPROC_DIR) on http://ADDR:PORT/metrics, until Ctrl-C or SIGTERM.

example:
  PROMETHEUS_MULTIPROC_DIR=/run/crew-metrics gunicorn -w 4 app:app &
  outcome-telemetry metrics-serve /run/crew-metrics --port 9464
"""


def main(argv: list[str]) -> int:
    parser = command_parser("metrics-serve", USAGE)
    parser.add_argument("dir", type=Path, help="the multiprocess metrics folder")
    parser.add_argument("--port", type=int, default=9464, help="port to listen on (0 picks one; default: %(default)s)")
    parser.add_argument("--addr", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    ns = parser.parse_args(argv)
    if not 0 <= ns.port <= 65535:
        parser.error(f"--port must be 0..65535, got {ns.port}")
    try:
        folder = resolve(ns.dir) if ns.dir.is_dir() else None
    except ConfigurationError as exc:
        parser.error(str(exc))
    if folder is None:
        parser.error(f"{ns.dir} is not a folder: give the PROMETHEUS_MULTIPROC_DIR folder the workers write to")
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(ns.port, addr=ns.addr, registry=aggregate_registry(folder))
    except OSError as exc:
        parser.error(f"cannot listen on {ns.addr}:{ns.port}: {exc}")
    port = server.server_address[1]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        print(f"serving the metrics of {folder} on http://{ns.addr}:{port}/metrics (Ctrl-C stops)", flush=True)
    except BrokenPipeError:
        pass
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(server)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

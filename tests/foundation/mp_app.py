"""A WSGI app for the multiprocess metrics test: each gunicorn worker imports it after the fork,
configures telemetry (multiprocess mode comes from PROMETHEUS_MULTIPROC_DIR) and serves

- ``/call``: one instrumented tool call; answers the worker's pid;
- ``/metrics``: the summed metrics of every worker, from whichever worker takes the request.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import telemetry

runtime = telemetry.configure(service_name="mp-app", traces_dir=None)
metrics_app = runtime.wsgi_app()


@telemetry.instrument_tool(name="lookup_order", kind="read")
def lookup_order(order_id: str) -> dict[str, Any]:
    time.sleep(0.01)  # long enough that concurrent requests spread over the workers
    return {"ok": True, "order_id": order_id}


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    if path == "/metrics":
        return metrics_app(environ, start_response)  # type: ignore[no-any-return]
    if path == "/call":
        lookup_order("o-1")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(os.getpid()).encode()]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found"]

"""Stopping a ``/metrics`` server at once instead of after its next poll (every server we start:
the runtime's, ``metrics-serve``'s and ``watch``'s).

``prometheus_client.start_http_server`` runs ``serve_forever`` with socketserver's default poll of
0.5 s, and ``shutdown()`` waits for the loop to notice: every server of ours took up to a poll
interval to shut down, idle. A connection to the server wakes the loop, which then sees the request to
stop; the connection is accepted and closed without a request, which the handler ends without an
answer.
"""

from __future__ import annotations

import socket
import threading
from socketserver import BaseServer

__all__ = ["stop_server"]

_WAKE_EVERY_S = 0.05
"""How often to wake the loop again while it has not stopped (a wake-up that came before the
request to stop only served a connection)."""


def stop_server(server: BaseServer) -> None:
    """Stop ``server``'s ``serve_forever`` loop (running in another thread) and close its socket."""
    stopper = threading.Thread(target=server.shutdown, name="outcome-telemetry-metrics-stop", daemon=True)
    stopper.start()
    while stopper.is_alive():
        _wake(server)
        stopper.join(_WAKE_EVERY_S)
    server.server_close()


def _wake(server: BaseServer) -> None:
    """Connect to ``server`` once, so its loop's wait returns; any failure leaves the poll to do it."""
    address = server.server_address
    if not isinstance(address, tuple):  # pragma: no cover - our servers are TCP
        return
    host, port = str(address[0]), int(address[1])
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    try:
        with socket.create_connection((host, port), timeout=_WAKE_EVERY_S):
            pass
    except OSError:
        pass

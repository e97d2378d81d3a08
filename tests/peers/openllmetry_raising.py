"""OpenLLMetry (traceloop-sdk): a ``@tool`` that raises inside a ``@workflow``.

traceloop-sdk's decorator records the exception the OpenTelemetry way (an ``exception`` span
event with ``exception.type``, ``exception.message`` and ``exception.stacktrace``) and sets the
status ERROR, but writes no ``error.type``: the event is the only place the error's type is.
The message carries the call's private detail (:data:`MESSAGE`), which no report may show.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .exporter import CollectorFileExporter

__all__ = ["MESSAGE", "TOOL", "write_story"]

TOOL = "charge_card"
MESSAGE = "card 4242-4242-4242-4242 declined by gateway-7 after 30 s"


class GatewayTimeout(TimeoutError):
    """The error the tool raises: its class name is what ``exception.type`` records."""


def write_story(path: Path) -> None:
    """Run the raising tool under ``Traceloop.init(exporter=..., disable_batch=True)``; write ``path``."""
    os.environ["TRACELOOP_TELEMETRY"] = "false"
    os.environ["TRACELOOP_METRICS_ENABLED"] = "false"
    os.environ["TRACELOOP_LOGGING_ENABLED"] = "false"
    os.environ.pop("TRACELOOP_API_KEY", None)
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import tool, workflow

    Traceloop.init(app_name="peer-story-traceloop-raising", api_endpoint="http://traceloop.invalid",
                   exporter=CollectorFileExporter(path), disable_batch=True, telemetry_enabled=False,
                   instruments=set())

    @tool(name=TOOL)
    def charge_card(amount_cents: int) -> dict[str, object]:
        raise GatewayTimeout(MESSAGE)

    @workflow(name="payments_raising")
    def payments() -> str:
        try:
            charge_card(1250)
        except GatewayTimeout:
            return "gave up"
        return "charged"

    payments()


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

"""Instrumented tools shared by the alerting tests and the app the end-to-end test scrapes:
a healthy read, a write whose read-back matches, and a write that says done while its outcome check finds it
was not (a silent failure)."""

from __future__ import annotations

from typing import Any

import telemetry
from telemetry import conventions as c


@telemetry.instrument_tool(kind="read")
def read_state(key: str) -> dict[str, Any]:
    return {"ok": True, "value": f"value of {key}"}


_store: dict[str, str] = {}


@telemetry.instrument_tool(kind="write", readback=lambda call, result: _store.get(call.arguments["key"]) == call.arguments["value"])
def write_state(key: str, value: str) -> dict[str, Any]:
    _store[key] = value
    return {"ok": True}


def _price_applied(call: Any, result: dict[str, Any]) -> str | None:
    """The outcome check: the price never reached the catalog, whatever the result said."""
    return c.OUTCOME_POSTCONDITION_FAILED


@telemetry.instrument_tool(kind="write", outcome=_price_applied)
def set_price(sku: str, price: float) -> dict[str, Any]:
    """Says done; the outcome check finds it was not: a silent failure."""
    return {"ok": True}

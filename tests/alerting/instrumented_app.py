"""An instrumented process for the end-to-end alerting test: real tools, real /metrics.

Run as ``python instrumented_app.py --traces-dir DIR --seconds N [--metrics-port P]``. It
configures the package with /metrics on 127.0.0.1 (port P, or a free one), prints one JSON line
``{"metrics_url": ...}`` and then
calls its tools in a loop until SIGTERM or N seconds, whichever comes first:

- ``read_state`` and ``write_state`` are all good (outcome ok, read-back not_applicable/match);
  the test checks that no alert ever names them;
- ``set_price`` returns ``{"ok": True}`` while its outcome check says ``postcondition_failed``:
  a silent failure, what ToolSilentFailure pages on;
- ``update_record``'s read-back mismatches on every other call;
- ``claim_row`` is refused as a stale version, ``send_update`` as a stale policy (a stale send),
  ``delegate_task`` waives a constraint, ``charge_card`` answers from its idempotency store;
- ``peer_refund`` is no decorated tool: another instrumentation's span (GenAI conventions, status
  unset) records its ``{"status": "error", ...}`` result, and ``observe_tool_spans`` on the
  runtime's provider counts it as a masked failure.

Together they give every dashboard panel data.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import telemetry
from telemetry import conventions as c

_stop = False


def _on_term(signum: int, frame: Any) -> None:
    global _stop
    _stop = True


from sample_tools import read_state, set_price, write_state  # noqa: E402

_flip = {"n": 0}


def _every_other(call: Any, result: Any) -> bool:
    _flip["n"] += 1
    return _flip["n"] % 2 == 0


@telemetry.instrument_tool(kind="write", readback=_every_other)
def update_record(key: str) -> dict[str, Any]:
    return {"ok": True}


@telemetry.instrument_tool(kind="write")
def claim_row(row: int) -> dict[str, Any]:
    return {"ok": False, "error": c.OUTCOME_REJECTED_STALE_VERSION}


@telemetry.instrument_tool(kind="send")
def send_update(text: str) -> dict[str, Any]:
    return {"ok": False, "error": c.OUTCOME_STALE_POLICY}


@telemetry.instrument_tool(kind="delegate")
def delegate_task(task: str) -> dict[str, Any]:
    telemetry.current_call().add_waivers(1)
    return {"ok": True}


@telemetry.instrument_tool(kind="write", idempotent=True)
def charge_card(key: str) -> dict[str, Any]:
    telemetry.current_call().mark_replayed()
    return {"ok": True}


def peer_refund(tracer: Any) -> None:
    """A tool call as a peer instrumentation records it: a GenAI execute_tool span, status left unset."""
    attributes = {
        c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL,
        c.GEN_AI_TOOL_NAME: "peer_refund",
        c.GEN_AI_TOOL_CALL_RESULT: json.dumps({"status": "error", "code": "refund_window_closed"}),
    }
    with tracer.start_as_current_span(c.SPAN_NAME_PREFIX + "peer_refund", attributes=attributes):
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces-dir", required=True)
    parser.add_argument("--seconds", type=float, default=120.0, help="stop after this long at most")
    parser.add_argument("--interval", type=float, default=0.05, help="pause between rounds of calls")
    parser.add_argument("--metrics-port", type=int, default=0, help="serve /metrics on this port (0: a free one)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    deadline = time.monotonic() + args.seconds
    with telemetry.configure(service_name="alerting-e2e", traces_dir=args.traces_dir, metrics_port=args.metrics_port) as rt:
        rt.provider.add_span_processor(telemetry.observe_tool_spans())
        peer = rt.provider.get_tracer("a-peer-instrumentation")
        print(json.dumps({"metrics_url": rt.metrics_url}), flush=True)
        n = 0
        while not _stop and time.monotonic() < deadline:
            n += 1
            read_state("plan")
            write_state("plan", f"v{n}")
            set_price("sku-1", 9.99)
            update_record("row-1")
            claim_row(n)
            send_update("status")
            delegate_task("review")
            charge_card("key-1")
            peer_refund(peer)
            time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())

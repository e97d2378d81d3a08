"""An MCP server exposing the guarded primitives as tools, instrumented with outcome-telemetry.

Tools: version-bound shared state (``read_state``, ``write_state``), constraint-carrying
delegation (``register_task``, ``get_task``, ``delegate``), versioned objectives
(``publish_objective``, ``get_objective``, ``supersede_objective``) and one guarded send
(``send_customer_message``, refused against a superseded refund policy). The guards are already
instrumented tools; they are registered as they are and ``telemetry.mcp.instrument_server``
publishes their hints as MCP annotations (and would instrument any bare tool added later).

The descriptions are written for the model: what a version token is, and what to do with each
refusal envelope. Every refusal is ``{"ok": false, "error": CODE, "message", "retry", ...}``.

Run it over stdio (spans go to ``./traces``, metrics on a free port printed to stderr)::

    python examples/mcp_guarded_server.py --db crew.sqlite3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

import telemetry
from telemetry.guards import Delegations, Objectives, SQLiteStore, StateStore, guarded_send
from telemetry.mcp import instrument_server

REFUND_POLICY = "refund-policy"
"""The objective whose version every customer message must be drafted against."""

ENVELOPE = (
    " Refusals come back as {ok: false, error: CODE, message, retry, ...}: nothing was done;"
    " read `message`, do what it says, and only retry when `retry` is true."
)

DESCRIPTIONS = {
    "read_state": (
        "Read a shared value. Returns {value, version, exists}. `version` is an opaque token that"
        " names exactly the value you just read (not a counter: never edit or guess it). Keep it:"
        " write_state needs it as expected_version. A key that does not exist has version \"absent\"."
    ),
    "write_state": (
        "Write a shared value, only if nobody changed it since your read_state. Pass the `version`"
        " that read gave you as expected_version (\"absent\" to create a key). On success returns the"
        " new `version`. error=rejected_stale_version means another agent wrote first and nothing was"
        " written: take current_value and current_version from the refusal, redo your change against"
        " current_value, and call write_state again with expected_version=current_version. Never"
        " resend an old token to force a write through. error=invalid_argument names the field to fix." + ENVELOPE
    ),
    "register_task": (
        "Register an origin task with its objective and constraints [{id, text}]: hop 0 of a delegation"
        " chain. Registering the same task again with the same content is a no-op. error=invalid_argument:"
        " the task_id is taken by a different task, or a field is malformed (the message says which);"
        " register the new task under a new task_id, or fix the field." + ENVELOPE
    ),
    "get_task": (
        "Read a task's objective, hop, root and its constraint ledger [{id, text}]: what you must carry"
        " when you delegate from it. error=not_found: use a task_id register_task or delegate returned."
    ),
    "delegate": (
        "Hand a subtask to a child task. Every constraint of the origin task (see get_task) must be"
        " either carried verbatim in `constraints` (same id and text) or listed in"
        " `waived_constraints` as {id, reason}. error=constraint_missing: the refusal lists"
        " missing_ids and required_constraints; copy those ids and texts into constraints (or waive"
        " them with a real reason) and call delegate again. invalid_argument: fix the fields the"
        " message names (unknown or repeated ids, empty reasons, criteria citing no carried id)."
        " error=not_found: delegate from a task id that register_task or delegate returned." + ENVELOPE
    ),
    "publish_objective": (
        "Publish a task's first objective; returns its `version`, an opaque token. error=invalid_argument"
        " with current_version: the task already has an objective and nothing was published; to change"
        " it use supersede_objective with a reason (otherwise fix the field the message names)." + ENVELOPE
    ),
    "get_objective": (
        "Read the current objective (for example the refund policy) and its `version`, and register"
        " you as holding that version. Draft against this text and pass this `version` as"
        " policy_version when you send. refresh_required=true means a copy you held earlier was"
        " superseded: drop anything drafted against it and redo it against this text. error=not_found:"
        " nothing is published for this task_id yet; check the id, or publish_objective it first." + ENVELOPE
    ),
    "supersede_objective": (
        "Replace a task's objective with a corrected one; returns the new `version` and `holders`,"
        " the agents still holding an older version, who must be told. expected_version must be the"
        " `version` you are correcting (from publish_objective or get_objective)."
        " error=rejected_stale_version: someone superseded it since you read it and nothing changed;"
        " read current_text, decide whether your correction still applies, and retry with"
        " expected_version=current_version. error=not_found: the task has no objective yet;"
        " publish_objective it instead." + ENVELOPE
    ),
    "send_customer_message": (
        "Send a message to a customer about a ticket. policy_version must be the `version`"
        f" get_objective('{REFUND_POLICY}', agent_id) returned. error=stale_policy: the policy you"
        " drafted against was superseded and nothing was sent; the refusal carries current_policy and"
        " current_version: redraft the message against current_policy and send it again with"
        " policy_version=current_version. error=invalid_argument: policy_version was never a version of"
        " the policy (or a field is malformed); call get_objective and pass the `version` it returns."
        f" error=not_found: no {REFUND_POLICY} is published yet; nothing can be sent until one is." + ENVELOPE
    ),
}


def build_server(db_path: str | Path, outbox: list[dict[str, Any]] | None = None) -> MCPServer:
    """The example server over one SQLite file; sent messages are appended to ``outbox``."""
    store = SQLiteStore(db_path)
    state, delegations, objectives = StateStore(store), Delegations(store), Objectives(store)
    sent = outbox if outbox is not None else []

    @telemetry.instrument_tool(kind="send")
    @guarded_send(objectives, policy_task_id=REFUND_POLICY)
    def send_customer_message(ticket_id: str, body: str, policy_version: str, agent_id: str) -> dict[str, Any]:
        """Send a message to a customer (here: append it to the outbox)."""
        sent.append({"ticket_id": ticket_id, "body": body, "policy_version": policy_version, "agent_id": agent_id})
        return {"ok": True, "ticket_id": ticket_id, "queued": len(sent)}

    server = MCPServer(
        "outcome-telemetry guarded tools",
        instructions=(
            "Shared state, delegation and policy tools that refuse stale or lossy actions. Keep every"
            " version token a read gives you and pass it back unchanged; when a call is refused, act on"
            " the refusal's message and context fields before retrying."
        ),
    )
    for method in (
        state.read_state,
        state.write_state,
        delegations.register_task,
        delegations.get_task,
        delegations.delegate,
        objectives.publish_objective,
        objectives.get_objective,
        objectives.supersede_objective,
        send_customer_message,
    ):
        name = getattr(method, telemetry.instrument.SPEC_ATTRIBUTE).name
        server.add_tool(method, name=name, description=DESCRIPTIONS[name])
    instrument_server(server)  # hints -> readOnly/destructive/idempotent annotations, checked once
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="crew.sqlite3", help="SQLite file shared by the crew (default: %(default)s)")
    parser.add_argument("--traces", default="traces", help="folder for OTLP JSON lines (default: %(default)s)")
    parser.add_argument("--metrics-port", type=int, default=0, help="/metrics on 127.0.0.1 (0: a free port)")
    args = parser.parse_args(argv)
    with telemetry.configure(service_name="mcp-guarded-server", traces_dir=args.traces, metrics_port=args.metrics_port) as runtime:
        print(f"metrics: {runtime.metrics_url}", file=sys.stderr)  # stdout is the MCP channel
        build_server(args.db).run("stdio")


if __name__ == "__main__":
    main()

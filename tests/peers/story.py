"""The one story every peer format tells: an agent run with three tools, four calls.

``charge_card`` returns a failure envelope (``{"success": false, ...}``), ``refund_payment`` is
called twice with identical arguments and returns an error status both times, ``lookup_order``
succeeds. Nothing raises: every instrumentation marks these spans OK or UNSET, which is what the
forensics reader must see through.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "CALLS", "FINAL_ANSWER", "PROMPT", "SESSION_ID", "USER_ID",
    "chat_loop", "charge_card", "lookup_order", "openai_tool_schemas", "refund_payment", "result_of",
]

SESSION_ID = "sess-story-1"
USER_ID = "user-7"
PROMPT = "Charge customer c-1 $32, refund payment p-9, then tell me where order o-5 is."
FINAL_ANSWER = "The charge failed (quota exceeded), the refund window is closed, and order o-5 has shipped."

CHARGE_RESULT: dict[str, Any] = {"success": False, "error": "quota_exceeded"}
REFUND_RESULT: dict[str, Any] = {"status": "error", "code": "refund_window_closed"}
LOOKUP_RESULT: dict[str, Any] = {"order_id": "o-5", "state": "shipped"}

# (call id, tool name, arguments) in the order the model asks for them, one model turn each.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("call_charge_1", "charge_card", {"customer_id": "c-1", "amount_cents": 3200}),
    ("call_refund_1", "refund_payment", {"payment_id": "p-9", "amount_cents": 3200}),
    ("call_refund_2", "refund_payment", {"payment_id": "p-9", "amount_cents": 3200}),
    ("call_lookup_1", "lookup_order", {"order_id": "o-5"}),
]


def charge_card(customer_id: str, amount_cents: int) -> dict[str, Any]:
    """Charge a customer's card on file."""
    return dict(CHARGE_RESULT)


def refund_payment(payment_id: str, amount_cents: int) -> dict[str, Any]:
    """Refund (part of) a payment."""
    return dict(REFUND_RESULT)


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order's state."""
    return dict(LOOKUP_RESULT)


TOOLS = {"charge_card": charge_card, "refund_payment": refund_payment, "lookup_order": lookup_order}


def result_of(name: str) -> dict[str, Any]:
    """What the tool called ``name`` returns in the story."""
    return {"charge_card": CHARGE_RESULT, "refund_payment": REFUND_RESULT, "lookup_order": LOOKUP_RESULT}[name]


def openai_tool_schemas() -> list[dict[str, Any]]:
    """The story's tools as OpenAI chat-completions ``tools``, for the peers that trace that client."""
    arguments = {name: args for _, name, args in CALLS}
    return [{"type": "function", "function": {"name": name, "description": fn.__doc__, "parameters": {
        "type": "object", "properties": {k: {"type": "integer" if k == "amount_cents" else "string"}
                                         for k in arguments[name]},
        "required": list(arguments[name])}}} for name, fn in TOOLS.items()]


def chat_loop(client: Any, tools: dict[str, Any], prompt: str) -> str:
    """The agent loop over a chat-completions ``client``: ask, run each tool the reply names with the
    (traced) ``tools``, answer with the results, until the reply calls no tool."""
    schemas = openai_tool_schemas()
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=schemas).choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls:
            result = tools[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})

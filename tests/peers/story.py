"""The one story every peer format tells: an agent run with three tools, four calls.

``charge_card`` returns a failure envelope (``{"success": false, ...}``), ``refund_payment`` is
called twice with identical arguments and returns an error status both times, ``lookup_order``
succeeds. Nothing raises: every instrumentation marks these spans OK or UNSET, which is what the
forensics reader must see through.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CALLS", "FINAL_ANSWER", "PROMPT", "SESSION_ID", "USER_ID",
    "charge_card", "lookup_order", "refund_payment", "result_of",
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

"""The crew's world: one SQLite database holding the guarded primitives and the legacy tools.

Everything a scenario touches is real: the guards' tables and the legacy tables live in one
SQLite file (so a run leaves a database you can open), and every tool is instrumented. The
catalog of the repricing story is seeded directly in the database (set-up, not agent work, so
it leaves no spans).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import conventions as c
from ..guards import (
    ABSENT_VERSION,
    Delegations,
    IdempotencyKeys,
    Objectives,
    Planner,
    PlanWriter,
    ScheduledSends,
    SQLiteStore,
    StateStore,
    Store,
    guarded_send,
)
from ..guards._state import current_row, put
from ..instrument import instrument_tool
from ._legacy import LegacyDelegation, LegacyKV, LegacyMessaging, LegacyPayments, ProfileService, RatesService

__all__ = ["CATALOG", "Catalog", "PROMO_POLICY", "REFUND_POLICY", "REVIEW_SECONDS", "World", "discounted"]

REFUND_POLICY = "refund-policy"
PROMO_POLICY = "promo-policy"
REVIEW_SECONDS = 900.0
"""The review window of the scheduled broadcast (the demo's clock moves; nobody waits)."""
CATALOG = "products"


@dataclass
class Catalog:
    """Products in two collections, and the stale collection index that causes the repricing bug."""

    target: str
    other: str
    target_keys: list[str]
    other_keys: list[str]
    stale_index: dict[str, str] = field(default_factory=dict)
    """For each target product, the product the stale index points at (in the other collection)."""


def _seed_catalog(state: StateStore, rng: random.Random, count: int) -> Catalog:
    season = rng.choice(["summer", "autumn", "spring"])
    target, other = f"{season}-2026", f"winter-2026-{rng.randrange(100, 999)}"
    target_keys = [f"{CATALOG}/{season}-{i:04d}" for i in range(count)]
    other_keys = [f"{CATALOG}/winter-{i:04d}" for i in range(count)]
    with state.store.transaction() as conn:
        for collection, keys in ((target, target_keys), (other, other_keys)):
            for key in keys:
                value = {"collection": collection, "price_cents": rng.randrange(1500, 9000)}
                put(conn, key, json.dumps(value, sort_keys=True, separators=(",", ":")), ABSENT_VERSION, actor="seed")
    return Catalog(target, other, target_keys, other_keys, dict(zip(target_keys, other_keys)))


def discounted(value: dict[str, Any], pct: float) -> dict[str, Any]:
    return {**value, "price_cents": round(value["price_cents"] * (100 - pct) / 100)}


class World:
    """The guarded primitives and their legacy counterparts, on one database."""

    def __init__(self, store: Store | Path, rng: random.Random, *, catalog_size: int = 412) -> None:
        self.store = store if isinstance(store, Store) else SQLiteStore(store)
        self.state = StateStore(self.store)
        self.keys = IdempotencyKeys(self.store, lease_seconds=30.0)
        self.planner = Planner(self.state, bindings={"app": lambda: "shop", "tool_schema_version": lambda: "2026-11"})
        self.delegations = Delegations(self.store)
        self.objectives = Objectives(self.store, new_version=lambda: "pv_%012x" % rng.getrandbits(48))
        self.kv = LegacyKV(self.store)
        self.legacy_delegation = LegacyDelegation(self.delegations)
        self.legacy_messaging = LegacyMessaging(self.store, REFUND_POLICY)
        self.legacy_payments = LegacyPayments(self.store)
        self.profiles = ProfileService(self.store)
        self.rates = RatesService()
        self.catalog = _seed_catalog(self.state, rng, catalog_size)
        self.outbox: list[dict[str, Any]] = []
        self.charges: dict[str, int] = {}
        self.now = 1_800_000_000.0
        """The scheduled sends' clock: a story moves it past a review window instead of waiting."""
        self.scheduled = ScheduledSends(self.store, self.objectives, clock=lambda: self.now)
        self._build_tools()
        self._build_scheduled_tools()

    def _build_tools(self) -> None:
        """Tools that are closures over the world (guarded send, idempotent charge, reprice)."""
        outbox, charges, catalog = self.outbox, self.charges, self.catalog

        @instrument_tool(name="send_customer_message", kind=c.KIND_SEND)
        @guarded_send(self.objectives, policy_task_id=REFUND_POLICY)
        def send_customer_message(ticket_id: str, body: str, policy_version: str, agent_id: str) -> dict[str, Any]:
            """Send a customer message under the refund policy version you hold."""
            outbox.append({"ticket_id": ticket_id, "body": body, "policy_version": policy_version})
            return {"ok": True, "message_id": f"msg-{len(outbox)}"}

        @instrument_tool(name="charge_card", kind=c.KIND_WRITE)
        @self.keys.idempotent(key_param="request_id")
        def charge_card(order_id: str, amount_cents: int, request_id: str) -> dict[str, Any]:
            """Charge a card once per request_id, however often the call is retried."""
            charges[order_id] = charges.get(order_id, 0) + 1
            return {"ok": True, "charge_id": f"ch-{order_id}-{charges[order_id]}"}

        def buggy_discount(writer: PlanWriter, key: str, value: Any, params: dict[str, Any]) -> None:
            # The injected bug: a stale collection index sends each write to another product.
            target = catalog.stale_index.get(key, key)
            writer.write(target, discounted(writer.read(target), params["discount_pct"]))

        self.planner.register_action("apply_discount_stale_index", buggy_discount)
        self.planner.register_transform("apply_discount", lambda value, params: discounted(value, params["discount_pct"]))
        self.send_customer_message: Callable[..., dict[str, Any]] = send_customer_message
        self.charge_card: Callable[..., dict[str, Any]] = charge_card
        self._build_legacy_catalog_tools()

    def _build_scheduled_tools(self) -> None:
        """A broadcast scheduled with a review window, and the same broadcast with none (sent at once)."""
        outbox = self.outbox

        @instrument_tool(name="broadcast_push", kind=c.KIND_SEND)
        @self.scheduled.schedule_send(policy_task_id=PROMO_POLICY, review_seconds=REVIEW_SECONDS)
        def broadcast_push(segment: str, body: str, policy_version: str, agent_id: str) -> dict[str, Any]:
            """Push a promotion to a customer segment; it is scheduled, and sent after a review window."""
            outbox.append({"segment": segment, "body": body, "policy_version": policy_version})
            return {"ok": True, "push_id": f"push-{len(outbox)}"}

        @instrument_tool(name="broadcast_push_now", kind=c.KIND_SEND)
        @self.scheduled.schedule_send(policy_task_id=PROMO_POLICY, review_seconds=0)
        def broadcast_push_now(segment: str, body: str, policy_version: str, agent_id: str) -> dict[str, Any]:
            """Push a promotion to a customer segment at the next firing pass, with no review window."""
            outbox.append({"segment": segment, "body": body, "policy_version": policy_version})
            return {"ok": True, "push_id": f"push-{len(outbox)}"}

        self.broadcast_push: Callable[..., dict[str, Any]] = self.scheduled.register(broadcast_push)
        self.broadcast_push_now: Callable[..., dict[str, Any]] = self.scheduled.register(broadcast_push_now)

    def _build_legacy_catalog_tools(self) -> None:
        state, catalog, product = self.state, self.catalog, self.product

        def price_persisted(call: Any, result: dict[str, Any]) -> bool:
            return bool(product(result["key"])["price_cents"] == call.arguments["price_cents"])

        @instrument_tool(name="legacy_update_price", kind=c.KIND_WRITE, readback=price_persisted)
        def update_price(key: str, price_cents: int) -> dict[str, Any]:
            """Set one product's price (200 OK, and it persists: the read-back matches)."""
            with state.store.transaction() as conn:
                row = current_row(conn, key)
                assert row is not None, f"no product {key}"
                value = {**json.loads(row[0]), "price_cents": price_cents}
                put(conn, key, json.dumps(value, sort_keys=True, separators=(",", ":")), row[1], actor="legacy")
            return {"ok": True, "key": key, "status_code": 200}

        def set_postcondition(call: Any, result: dict[str, Any]) -> str | None:
            """The intent check telemetry adds: did exactly the asked-for collection change?"""
            wanted = call.arguments["collection"]
            outside = sum(1 for key in result["updated"] if product(key)["collection"] != wanted)
            call.set_attributes(
                {c.PLAN_CHANGED_COUNT: len(result["updated"]), c.PLAN_OUTSIDE_TARGET_CHANGED_COUNT: outside}
            )
            return c.OUTCOME_POSTCONDITION_FAILED if outside else None

        @instrument_tool(name="legacy_reprice_collection", kind=c.KIND_WRITE, outcome=set_postcondition)
        def reprice_collection(collection: str, discount_pct: float) -> dict[str, Any]:
            """Discount every product of a collection (found through the collection index)."""
            updated = []
            for key in catalog.target_keys if collection == catalog.target else []:
                wrong = catalog.stale_index[key]  # the same stale index as the guarded story
                update_price(wrong, discounted(product(wrong), discount_pct)["price_cents"])
                updated.append(wrong)
            return {"ok": True, "updated": updated, "message": f"Done! {len(updated)} prices updated."}

        self.reprice_collection: Callable[..., dict[str, Any]] = reprice_collection

    def product(self, key: str) -> dict[str, Any]:
        """A catalog product's current value, read from the database (the source of truth)."""
        with self.store.read() as conn:
            return _product(conn, key)

    def prices(self, keys: list[str]) -> list[int]:
        """The current price of each of ``keys``, read in one read transaction (the stories
        compare whole collections before and after)."""
        with self.store.read() as conn:
            return [int(_product(conn, key)["price_cents"]) for key in keys]


def _product(conn: Any, key: str) -> dict[str, Any]:
    row = current_row(conn, key)
    assert row is not None, f"no product {key}"
    value: dict[str, Any] = json.loads(row[0])
    return value

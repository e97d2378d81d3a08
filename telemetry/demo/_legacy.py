"""Legacy tools: the unguarded shapes most agent tool layers start with, instrumented.

Each is the "before" of a guarded primitive: an unversioned get/set, a free-text hand-off, a
send with no policy version, a bulk reprice with no plan, a charge with no idempotency key, and
a profile update whose read-back goes through a cache, a rate-limited lookup whose 429 gives no
wait and leaks the client's exception text. They do what they are asked and answer
ok; the decorator records what forensics needs to find the failure afterwards (the versions the
store really had, the constraint ids that survived a hand-off, the request id's hash), because
instrumentation can see what the tool's signature cannot express.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from .. import conventions as c
from ..guards import ABSENT_VERSION, Delegations, IdempotencyKeys, Store, refusal, success
from ..instrument import Call, current_call, instrument_tool

_DDL = """
CREATE TABLE IF NOT EXISTS legacy_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, rev TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS legacy_sends (id INTEGER PRIMARY KEY, ticket_id TEXT, body TEXT, agent TEXT);
CREATE TABLE IF NOT EXISTS legacy_charges (id INTEGER PRIMARY KEY, order_id TEXT, amount_cents INTEGER);
CREATE TABLE IF NOT EXISTS profiles (key TEXT PRIMARY KEY, value TEXT NOT NULL, rev TEXT NOT NULL);
"""


def _rev() -> str:
    return "r" + secrets.token_hex(6)


class LegacyKV:
    """An unversioned key/value store: ``get(key)`` and ``set(key, value)``, nothing else.

    The store keeps a hidden revision per key, as any database would; the tool API does not
    expose it (that is the bug), but the instrumentation records it as ``state.version.read``
    and ``state.version.written`` so forensics can see which baseline each write came from.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        store.ensure_schema("crew.legacy", _DDL)

    @instrument_tool(name="legacy_get", kind=c.KIND_READ)
    def get(self, key: str) -> Any:
        """Return the value of ``key`` (None when absent)."""
        with self.store.read() as conn:
            row = conn.execute("SELECT value, rev FROM legacy_kv WHERE key = ?", (key,)).fetchone()
        current_call().set_attributes({c.STATE_KEY: key, c.STATE_VERSION_READ: row["rev"] if row else ABSENT_VERSION})
        return json.loads(row["value"]) if row else None

    @instrument_tool(name="legacy_set", kind=c.KIND_WRITE, readback=lambda call, result: call.args[0]._persisted(result))
    def set(self, key: str, value: Any) -> dict[str, Any]:
        """Overwrite ``key`` with ``value``, whatever happened to it since you read it."""
        rev = _rev()
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO legacy_kv (key, value, rev) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, rev = excluded.rev",
                (key, json.dumps(value), rev),
            )
        current_call().set_attributes({c.STATE_KEY: key, c.STATE_VERSION_WRITTEN: rev})
        return {"ok": True, "key": key, "rev": rev}

    def _persisted(self, result: dict[str, Any]) -> bool:
        with self.store.read() as conn:
            row = conn.execute("SELECT rev FROM legacy_kv WHERE key = ?", (result["key"],)).fetchone()
        return row is not None and row["rev"] == result["rev"]


class LegacyDelegation:
    """A free-text hand-off, ``delegate(subtask, context)``, with the ledger ids recorded on it.

    The pattern of ``docs/coordination.md``: the tool refuses nothing, and
    :meth:`Delegations.legacy_handoff` records which of the root's constraints survived into
    the free text, so ``constraint_loss_by_hop`` can name the hop that dropped one.
    """

    def __init__(self, delegations: Delegations) -> None:
        self.delegations = delegations

    @instrument_tool(name="legacy_delegate", kind=c.KIND_DELEGATE)
    def delegate(self, subtask: str, context: str, origin_task_id: str, agent_id: str) -> dict[str, Any]:
        """Hand ``subtask`` on with free-text ``context`` (the harness supplies the origin id)."""
        return self.delegations.legacy_handoff(context, origin_task_id=origin_task_id, subtask=subtask, agent_id=agent_id)


class LegacyMessaging:
    """``send_customer_message(ticket_id, body)``: no policy version, so no way to refuse a stale one."""

    def __init__(self, store: Store, policy_task_id: str) -> None:
        self.store = store
        self.policy_task_id = policy_task_id
        store.ensure_schema("crew.legacy", _DDL)

    @instrument_tool(name="legacy_send_customer_message", kind=c.KIND_SEND)
    def send_customer_message(self, ticket_id: str, body: str, agent_id: str) -> dict[str, Any]:
        """Send ``body`` to the customer of ``ticket_id``."""
        current_call().set_attributes({c.OBJECTIVE_TASK_ID: self.policy_task_id, c.GEN_AI_AGENT_ID: agent_id})
        with self.store.transaction() as conn:
            row = conn.execute(
                "INSERT INTO legacy_sends (ticket_id, body, agent) VALUES (?, ?, ?) RETURNING id", (ticket_id, body, agent_id)
            ).fetchone()
        return {"ok": True, "message_id": f"msg-{row[0]}"}


class LegacyPayments:
    """``charge_card(order_id, amount_cents, request_id)``: the request id is taken and ignored."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.ensure_schema("crew.legacy", _DDL)
        # The hashes the guarded tool records (the store's HMAC), so forensics correlates both.
        self._hashes = IdempotencyKeys(store)

    @instrument_tool(name="legacy_charge_card", kind=c.KIND_WRITE)
    def charge_card(self, order_id: str, amount_cents: int, request_id: str) -> dict[str, Any]:
        """Charge ``amount_cents`` for ``order_id``."""
        current_call().set_attributes(
            {
                c.IDEMPOTENCY_KEY_HASH: self._hashes.hash("legacy_charge_card", request_id),
                c.IDEMPOTENCY_PAYLOAD_HASH: self._hashes.hash(order_id, str(amount_cents)),
            }
        )
        with self.store.transaction() as conn:
            row = conn.execute(
                "INSERT INTO legacy_charges (order_id, amount_cents) VALUES (?, ?) RETURNING id", (order_id, amount_cents)
            ).fetchone()
        return {"ok": True, "charge_id": f"ch-{row[0]}"}

    def charges(self, order_id: str) -> int:
        with self.store.read() as conn:
            return int(conn.execute("SELECT count(*) FROM legacy_charges WHERE order_id = ?", (order_id,)).fetchone()[0])


class ProfileService:
    """User profiles in the database, fronted by a write-through cache, with one injected fault.

    ``lose_next_write`` makes the next database write vanish (a fail-over that dropped it) while
    the cache is updated anyway. Two tools update a profile: the legacy one reads its write back
    through the cache (which repeats what was just sent, so it always "matches"); the guarded
    one reads back from the database, the source of truth, and tells the caller when the write
    did not persist.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cache: dict[str, tuple[str, str]] = {}
        self.lose_next_write = False
        store.ensure_schema("crew.legacy", _DDL)

    def _write(self, key: str, value: str) -> str:
        rev = _rev()
        self.cache[key] = (value, rev)
        if self.lose_next_write:
            self.lose_next_write = False
            return rev
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO profiles (key, value, rev) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, rev = excluded.rev",
                (key, value, rev),
            )
        return rev

    def _db(self, key: str) -> tuple[str, str] | None:
        with self.store.read() as conn:
            row = conn.execute("SELECT value, rev FROM profiles WHERE key = ?", (key,)).fetchone()
        return (row["value"], row["rev"]) if row else None

    def _record(self, call: Call, key: str, rev: str) -> dict[str, Any]:
        call.set_attributes({c.STATE_KEY: key, c.STATE_VERSION_WRITTEN: rev})
        return {"ok": True, "key": key, "rev": rev}

    @instrument_tool(
        name="legacy_update_email",
        kind=c.KIND_WRITE,
        readback=lambda call, result: call.args[0].cache.get(result["key"]) == (call.arguments["email"], result["rev"]),
    )
    def legacy_update_email(self, user: str, email: str) -> dict[str, Any]:
        """Update a user's email; the read-back goes through the cache."""
        key = f"profile/{user}"
        return self._record(current_call(), key, self._write(key, email))

    @instrument_tool(
        name="update_email",
        kind=c.KIND_WRITE,
        readback=lambda call, result: call.args[0]._db(result["key"]) == (call.arguments["email"], result["rev"]),
    )
    def update_email(self, user: str, email: str) -> dict[str, Any]:
        """Update a user's email, verified against the database before answering ok."""
        key = f"profile/{user}"
        written = self._record(current_call(), key, self._write(key, email))
        if self._db(key) != (email, written["rev"]):
            return refusal(
                c.OUTCOME_READBACK_MISMATCH,
                f"the update of {key} returned from the database layer, but the database does not hold it "
                f"(a fail-over can drop a write): nothing persisted. Send the same update again.",
                retry=True, key=key, rev=written["rev"])
        return written

    @instrument_tool(name="get_profile", kind=c.KIND_READ)
    def get_profile(self, user: str) -> dict[str, Any]:
        """Read a profile from the database; ``not_found`` for a user without one."""
        key = f"profile/{user}"
        row = self._db(key)
        current_call().set_attributes({c.STATE_KEY: key, c.STATE_VERSION_READ: row[1] if row else ABSENT_VERSION})
        if row is None:
            return refusal(c.OUTCOME_NOT_FOUND, f"no profile for user {user!r}: check the user id (nothing to read).",
                           retry=False)
        return {"ok": True, "email": row[0]}


class RatesService:
    """A carrier's shipping-rate API behind a rate limit, with its legacy and its guarded tool.

    The limit is tripped by :meth:`trip` (another tenant used the quota up); while it holds, every
    call is refused and restarts the cool-down, as many APIs punish a caller that does not wait.
    The legacy tool passes the carrier's 429 through with the client library's exception text and
    no wait; the guarded one answers ``rate_limited`` with ``retry_after_seconds``.
    """

    def __init__(self, cooldown_seconds: float = 0.05) -> None:
        self.cooldown_seconds = cooldown_seconds
        self.blocked_until = 0.0
        self.upstream_calls = 0

    def trip(self) -> None:
        self.blocked_until = time.monotonic() + self.cooldown_seconds

    def _limited(self) -> bool:
        """One call to the carrier: True when it was refused (and the cool-down restarted)."""
        self.upstream_calls += 1
        now = time.monotonic()
        if now < self.blocked_until:
            self.blocked_until = now + self.cooldown_seconds
            return True
        return False

    @staticmethod
    def _rates(sku: str) -> dict[str, int]:
        return {"ground": 700 + len(sku), "express": 1900 + len(sku)}

    @instrument_tool(name="legacy_fetch_rates", kind=c.KIND_READ)
    def legacy_fetch_rates(self, sku: str) -> dict[str, Any]:
        """Shipping rates for a SKU, as the carrier's client returns them."""
        if self._limited():
            return {"status_code": 429, "message": "carrier.RateLimitError: 429 Too Many Requests"}
        return {"sku": sku, "rates_cents": self._rates(sku)}

    @instrument_tool(name="fetch_rates", kind=c.KIND_READ)
    def fetch_rates(self, sku: str) -> dict[str, Any]:
        """Shipping rates for a SKU; a rate limit is ``rate_limited`` with the wait before a retry."""
        if self._limited():
            return refusal(
                c.OUTCOME_RATE_LIMITED,
                f"The carrier's rate limit is in effect. Wait {self.cooldown_seconds:g} s, then call fetch_rates "
                f"again; a call before then restarts the wait.",
                retry=True, retry_after_seconds=self.cooldown_seconds)
        return success(sku=sku, rates_cents=self._rates(sku))

"""Idempotency keys: replays return the stored outcome, another payload is refused, claims are exclusive."""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path
from typing import Any

import pytest

from telemetry import ConfigurationError, instrument_tool
from telemetry import conventions as c
from telemetry.guards import IdempotencyKeys, SQLiteStore, open_store
from telemetry.testing import Capture

import worker_processes
from . import guard_workers


@pytest.fixture
def keys(store_url: str) -> IdempotencyKeys:
    return IdempotencyKeys(open_store(store_url), lease_seconds=30, retry_after_seconds=0.5)


class Refunds:
    """A non-idempotent write whose every real run is counted."""

    def __init__(self, keys: IdempotencyKeys) -> None:
        self.runs: list[tuple[str, int]] = []
        self.fail_next = False
        self.refuse_next = False

        @instrument_tool(name="issue_refund", kind=c.KIND_WRITE)
        @keys.idempotent()
        def issue_refund(order_id: str, amount_cents: int, idempotency_key: str) -> dict[str, Any]:
            """Refund an order (a retry with the same key never refunds twice)."""
            if self.fail_next:
                self.fail_next = False
                raise ConnectionError("payment provider unreachable")
            if self.refuse_next:
                self.refuse_next = False
                return {"ok": False, "error": c.OUTCOME_RATE_LIMITED, "message": "slow down", "retry": True}
            self.runs.append((order_id, amount_cents))
            return {"ok": True, "refund_id": f"rf_{len(self.runs)}", "amount_cents": amount_cents}

        self.issue_refund = issue_refund


def test_replay_returns_the_stored_outcome_without_running(keys: IdempotencyKeys, telemetry_capture: Capture) -> None:
    """The same key and arguments twice: one refund, the replay is marked deduplicated and counted."""
    refunds = Refunds(keys)
    first = refunds.issue_refund("o-1", 3200, idempotency_key="refund-o-1")
    again = refunds.issue_refund("o-1", 3200, idempotency_key="refund-o-1")
    assert refunds.runs == [("o-1", 3200)]
    assert first == {"ok": True, "refund_id": "rf_1", "amount_cents": 3200}
    assert again["deduplicated"] is True and again["refund_id"] == "rf_1"
    assert again["original_id"].startswith("idem_")
    spans = telemetry_capture.spans("issue_refund")
    assert c.TOOL_DEDUPLICATED not in spans[0].attributes
    assert spans[1].attributes[c.TOOL_DEDUPLICATED] is True
    assert spans[0].attributes[c.IDEMPOTENCY_ORIGINAL_ID] == spans[1].attributes[c.IDEMPOTENCY_ORIGINAL_ID]
    assert spans[0].attributes[c.IDEMPOTENCY_KEY_HASH] == spans[1].attributes[c.IDEMPOTENCY_KEY_HASH]
    assert telemetry_capture.sample(c.METRIC_IDEMPOTENT_REPLAYS_TOTAL, {c.LABEL_TOOL: "issue_refund"}) == 1


def test_raw_key_is_never_recorded_or_stored(keys: IdempotencyKeys, telemetry_capture: Capture) -> None:
    """Only hashes of the key reach the span and the table."""
    refunds = Refunds(keys)
    refunds.issue_refund("o-1", 100, idempotency_key="customer-jane@example.com-refund")
    attrs = telemetry_capture.span("issue_refund").attributes
    assert all("jane" not in str(v) for v in attrs.values())
    with keys.store.read() as conn:
        rows = [tuple(r) for r in conn.execute("SELECT * FROM guard_idempotency")]
    assert rows and all("jane" not in str(v) for row in rows for v in row)


def test_same_key_other_payload_is_duplicate_request(keys: IdempotencyKeys, telemetry_capture: Capture) -> None:
    """Reusing a key with a different amount is refused, naming the original outcome's id; nothing runs."""
    refunds = Refunds(keys)
    refunds.issue_refund("o-1", 3200, idempotency_key="k1")
    original = telemetry_capture.span("issue_refund").attributes[c.IDEMPOTENCY_ORIGINAL_ID]
    refused = refunds.issue_refund("o-1", 9900, idempotency_key="k1")
    assert refunds.runs == [("o-1", 3200)]
    assert refused["ok"] is False and refused["error"] == c.OUTCOME_DUPLICATE_REQUEST and refused["retry"] is False
    assert refused["original_id"] == original and original in refused["message"]
    assert "use a new key" in refused["message"]
    labels = {c.LABEL_TOOL: "issue_refund", c.LABEL_REASON: c.OUTCOME_DUPLICATE_REQUEST}
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, labels) == 1


def test_keys_are_scoped_per_tool(keys: IdempotencyKeys) -> None:
    """One key on two different tools is two requests."""
    a, b = Refunds(keys), Refunds(keys)

    @instrument_tool(name="other_write", kind=c.KIND_WRITE)
    @keys.idempotent(scope="refund-notes")
    def other_write(amount_cents: int, idempotency_key: str) -> dict[str, Any]:
        return {"ok": True}

    a.issue_refund("o-1", 1, idempotency_key="shared")
    assert other_write(5, idempotency_key="shared") == {"ok": True}
    assert b.issue_refund("o-1", 1, idempotency_key="shared")["deduplicated"] is True  # same scope: replay


def test_exception_releases_the_key(keys: IdempotencyKeys) -> None:
    """A write that raised stored nothing, so the retry with the same key runs."""
    refunds = Refunds(keys)
    refunds.fail_next = True
    with pytest.raises(ConnectionError):
        refunds.issue_refund("o-1", 10, idempotency_key="k")
    assert refunds.issue_refund("o-1", 10, idempotency_key="k")["refund_id"] == "rf_1"
    assert refunds.runs == [("o-1", 10)]


def test_retryable_refusal_is_not_stored(keys: IdempotencyKeys) -> None:
    """A refusal with retry true releases the key: the retry runs instead of replaying the refusal."""
    refunds = Refunds(keys)
    refunds.refuse_next = True
    assert refunds.issue_refund("o-1", 10, idempotency_key="k")["error"] == c.OUTCOME_RATE_LIMITED
    assert refunds.issue_refund("o-1", 10, idempotency_key="k")["ok"] is True


def test_claim_held_by_a_running_call_answers_in_progress(keys: IdempotencyKeys, telemetry_capture: Capture) -> None:
    """While the first call runs, the same key is refused as in_progress with a retry delay."""
    answers: list[dict[str, Any]] = []

    @instrument_tool(name="slow_send", kind=c.KIND_SEND)
    @keys.idempotent()
    def slow_send(text: str, idempotency_key: str) -> dict[str, Any]:
        answers.append(slow_send(text, idempotency_key=idempotency_key))  # re-entered while claimed
        return {"ok": True, "sent": text}

    assert slow_send("hi", idempotency_key="k") == {"ok": True, "sent": "hi"}
    inner = answers[0]
    assert inner["error"] == c.OUTCOME_IN_PROGRESS and inner["retry"] is True
    assert inner["retry_after_seconds"] == 0.5 and "still running" in inner["message"]
    labels = {c.LABEL_TOOL: "slow_send", c.LABEL_REASON: c.OUTCOME_IN_PROGRESS}
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, labels) == 1
    assert slow_send("hi", idempotency_key="k")["deduplicated"] is True


def test_claim_of_a_crashed_process_is_taken_over_after_its_lease(store_url: str) -> None:
    """A process that died holding a key blocks it only until the lease ends, then the retry runs."""
    db = store_url
    keys = IdempotencyKeys(open_store(db), lease_seconds=600)  # long: the lease ends when the test says
    ctx = worker_processes.context(guard_workers)
    start = ctx.Event()
    proc = ctx.Process(target=guard_workers.crash_holding_claim, args=(db, "k", start))
    proc.start()
    start.set()
    proc.join(60)
    assert proc.exitcode == 3
    runs = []

    @keys.idempotent(scope="crashy")
    def crashy_write(n: int, idempotency_key: str) -> dict[str, Any]:
        runs.append(n)
        return {"ok": True}

    blocked = crashy_write(1, idempotency_key="k")
    assert blocked["error"] == c.OUTCOME_IN_PROGRESS and runs == []
    with keys.store.transaction() as conn:  # the dead holder's lease runs out (no sleeping on a busy CI box)
        conn.execute("UPDATE guard_idempotency SET lease_until = ? WHERE scope = 'crashy'", (time.time() - 1,))
    assert crashy_write(1, idempotency_key="k") == {"ok": True} and runs == [1]


def test_async_tools_are_supported(keys: IdempotencyKeys) -> None:
    """An async tool is awaited once; its replay comes from the store."""
    runs = []

    @instrument_tool(name="async_charge", kind=c.KIND_WRITE)
    @keys.idempotent()
    async def async_charge(amount: int, idempotency_key: str) -> dict[str, Any]:
        runs.append(amount)
        await asyncio.sleep(0)
        return {"ok": True, "amount": amount}

    assert inspect.iscoroutinefunction(async_charge)

    async def both() -> tuple[Any, Any]:
        return await async_charge(5, idempotency_key="a"), await async_charge(5, idempotency_key="a")

    first, second = asyncio.run(both())
    assert runs == [5] and first == {"ok": True, "amount": 5} and second["deduplicated"] is True


def test_non_dict_results_replay_wrapped(keys: IdempotencyKeys) -> None:
    """A plain result replays as {"ok": true, "result": ...} with deduplicated set."""

    @keys.idempotent()
    def make_id(prefix: str, idempotency_key: str) -> str:
        return prefix + "-1"

    assert make_id("a", idempotency_key="k") == "a-1"
    replay = make_id("a", idempotency_key="k")
    assert replay == {"ok": True, "result": "a-1", "deduplicated": True, "original_id": replay["original_id"]}


@pytest.mark.parametrize("key", ["", "   ", None, 42, "k" * 600])
def test_bad_key_is_invalid_argument(keys: IdempotencyKeys, key: Any) -> None:
    """A missing, empty, non-string or oversized key is refused before anything runs."""
    refunds = Refunds(keys)
    result = refunds.issue_refund("o-1", 10, idempotency_key=key)
    assert result["error"] == c.OUTCOME_INVALID_ARGUMENT and "idempotency_key" in result["message"]
    assert refunds.runs == []


def test_decorator_misuse_fails_at_decoration(keys: IdempotencyKeys) -> None:
    """Wrong order, a missing key parameter and generators are configuration errors."""

    @instrument_tool(name="already", kind=c.KIND_WRITE)
    def already(idempotency_key: str) -> None: ...

    with pytest.raises(ConfigurationError, match="below @instrument_tool"):
        keys.idempotent()(already)
    with pytest.raises(ConfigurationError, match="no parameter 'idempotency_key'"):
        keys.idempotent()(lambda x: x)

    def gen(idempotency_key: str) -> Any:
        yield 1

    with pytest.raises(ConfigurationError, match="generator"):
        keys.idempotent()(gen)


def test_signature_is_kept_for_schema_frameworks(keys: IdempotencyKeys) -> None:
    """The wrapped tool shows the original parameters and docstring."""
    refunds = Refunds(keys)
    assert list(inspect.signature(refunds.issue_refund).parameters) == ["order_id", "amount_cents", "idempotency_key"]
    assert "never refunds twice" in (refunds.issue_refund.__doc__ or "")


def test_a_call_that_outlives_its_lease_is_marked_on_its_span(keys: IdempotencyKeys, telemetry_capture: Capture) -> None:
    """When a slow call's lease runs out and a retry takes the key over, the slow call's span says so."""
    runs: list[str] = []

    @instrument_tool(name="slow_charge")
    @keys.idempotent(scope="slow")
    def slow_charge(amount: int, idempotency_key: str) -> dict[str, Any]:
        runs.append("run")
        if len(runs) == 1:  # the first call is still running when its lease expires...
            with keys.store.transaction() as conn:
                conn.execute("UPDATE guard_idempotency SET lease_until = ? WHERE scope = 'slow'", (time.time() - 1,))
            slow_charge(amount, idempotency_key=idempotency_key)  # ...and a retry takes the key over
        return {"ok": True}

    assert slow_charge(5, idempotency_key="k") == {"ok": True}
    assert runs == ["run", "run"]  # the write ran twice: what the lease is there to bound
    retry, first = telemetry_capture.spans("slow_charge")  # the retry ends first (it is nested)
    assert first.attributes.get(c.IDEMPOTENCY_LEASE_LOST) is True
    assert c.IDEMPOTENCY_LEASE_LOST not in retry.attributes


def test_key_hashes_are_keyed_per_store(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A guessable key cannot be confirmed from a span: hashes are HMACs under a secret kept in the store,
    the same for every process sharing that store and different for another store."""
    import hashlib

    one = IdempotencyKeys(SQLiteStore(tmp_path / "one.db"))
    again = IdempotencyKeys(SQLiteStore(tmp_path / "one.db"))  # another process, the same database
    other = IdempotencyKeys(SQLiteStore(tmp_path / "other.db"))
    assert one.hash("charge", "refund-order-123") == again.hash("charge", "refund-order-123")
    assert one.hash("charge", "refund-order-123") != other.hash("charge", "refund-order-123")

    @instrument_tool(name="charge")
    @one.idempotent(scope="charge")
    def charge(amount: int, idempotency_key: str) -> dict[str, Any]:
        return {"ok": True}

    charge(5, idempotency_key="refund-order-123")
    recorded = telemetry_capture.span("charge").attributes[c.IDEMPOTENCY_KEY_HASH]
    assert recorded == one.hash("charge", "refund-order-123")
    plain = hashlib.sha256(b"charge\0refund-order-123\0").hexdigest()[:32]
    assert recorded != plain and "refund-order-123" not in str(dict(telemetry_capture.span("charge").attributes))

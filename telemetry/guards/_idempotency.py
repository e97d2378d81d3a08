"""Idempotency keys for non-idempotent writes: a retry returns the first outcome, never a second write.

Wrap a tool with :meth:`IdempotencyKeys.idempotent` (below ``@instrument_tool``, so the replay
is counted on the tool's own span)::

    keys = IdempotencyKeys(store)

    @instrument_tool(name="issue_refund", kind="write")
    @keys.idempotent()
    def issue_refund(order_id: str, amount_cents: int, idempotency_key: str) -> dict: ...

The first call with a key claims it (one exclusive write transaction, so of two processes or
hosts racing on one key exactly one wins), runs the tool and stores its result under the key. A later
call with the same key and the same arguments (the *payload*: every bound argument except the key)
gets the stored result back with ``deduplicated: true`` and the tool does not run. The same key
with different arguments is refused as ``duplicate_request`` naming the original outcome's id.

"The same arguments" means the same canonical JSON text (in the spirit of RFC 8785): object
keys in sorted order, numbers by value (``500`` and ``500.0`` are one amount), sets and tuples
as arrays (a set sorted by its members' canonical text), so the same retry sent from another
process, with another ``PYTHONHASHSEED``, is recognised. Arguments that are not JSON-like (an
object, a datetime, a lone surrogate, an integer beyond 64 bits, a value nested more than 64
deep) are refused as ``invalid_argument`` before anything runs: convert them to plain values
(an ISO date string, a dict) in the tool's signature.

While the first call is still running, a concurrent call with the same key is refused as
``in_progress`` with ``retry: true`` and ``retry_after_seconds``; retrying later returns the
stored result. The running call renews its lease every third of ``lease_seconds`` (a heartbeat
thread), so a slow call is never taken over while its process lives; a claim whose holder died
stops being renewed and is taken over once the lease runs out, so a crashed process delays a
retry rather than blocking the key forever.

What is stored: any returned result, except a refusal with ``retry: true`` (a stale version, a
rate limit: the caller is meant to retry, so the key is released). An exception releases the
key too: a tool should raise only when nothing was written. The store failing then never hides
the tool's exception. Storing a result outlives a lost connection or a store down for a while:
it is tried again, on a fresh connection, until the claim's lease would end (the call waits),
because a key left claimed after the tool's write would let a retry after the lease write twice. Results are stored as JSON; a
replay returns the JSON form (a non-dict result comes back as ``{"ok": true, "result": ...}``).
Keys and payloads are stored and recorded only as hashes.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from .. import conventions as c
from ..exceptions import ConfigurationError, GuardError
from ..instrument import SPEC_ATTRIBUTE, classify_result, current_call
from ..runtime import _containment as _safe
from . import _validation as validation
from ._envelope import busy_refusal, refusal
from ._store import Store, StoreBusy, require_store
from ._validation import BadInput

__all__ = ["KEY_PARAMETER_ATTRIBUTE", "IdempotencyKeys"]

logger = logging.getLogger("telemetry")

F = TypeVar("F", bound=Callable[..., Any])

SCHEMA_NAME: Final = "guards.idempotency"
DDL: Final = """
CREATE TABLE IF NOT EXISTS guard_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS guard_idempotency (
    scope        TEXT NOT NULL,
    key_hash     TEXT NOT NULL,
    payload_hash TEXT NOT NULL,
    original_id  TEXT NOT NULL,
    status       TEXT NOT NULL,
    result       TEXT,
    outcome      TEXT,
    claimed_at   REAL NOT NULL,
    lease_until  REAL NOT NULL,
    completed_at REAL,
    PRIMARY KEY (scope, key_hash)
);
"""
_RUNNING, _DONE = "running", "done"
_SECRET_NAME = "idempotency.hmac_key"
_SKIPPED_PARAMETERS = frozenset({"self", "cls"})

KEY_PARAMETER_ATTRIBUTE: Final = "__outcome_telemetry_idempotency_key__"
"""Set on every function :meth:`IdempotencyKeys.idempotent` guards: the name of its key parameter.

``functools.wraps`` copies it onto the wrappers above (``@instrument_tool`` included), so a tool
audit can tell a key that is deduplicated on from a parameter that is merely called ``request_id``.
"""


class IdempotencyKeys:
    """Stores the outcome of each keyed call in a guard store; see the module docstring.

    ``clock`` returns the current time in seconds since the epoch (default ``time.time``; a test
    or a simulator may pass its own). Every process sharing a store must use the same clock.
    """

    def __init__(
        self,
        store: Store,
        *,
        lease_seconds: float = 300.0,
        retry_after_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        store = require_store(store, "IdempotencyKeys")
        for name, value in (("lease_seconds", lease_seconds), ("retry_after_seconds", retry_after_seconds)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise GuardError(f"{name} must be a positive number of seconds, got {validation.show(value)}")
        if not callable(clock):
            raise GuardError(f"clock must be a function returning seconds since the epoch, got {validation.show(clock)}")
        self.store = store
        self.lease_seconds = float(lease_seconds)
        self.retry_after_seconds = float(retry_after_seconds)
        self.clock = clock
        self._heartbeat = _Heartbeat(self.lease_seconds)
        store.ensure_schema(SCHEMA_NAME, DDL)
        self._secret = self._hash_secret()
        self._guarded: list[Callable[..., Any]] = []

    @property
    def guarded(self) -> tuple[Callable[..., Any], ...]:
        """The functions :meth:`idempotent` decorated, as it returned them (before any decorator above)."""
        return tuple(self._guarded)

    def _hash_secret(self) -> bytes:
        """The store's HMAC key for key and payload hashes, made once per database.

        Keys such as ``refund-order-123`` are guessable, so a plain hash on a span would confirm
        them; an HMAC under a secret kept in the store does not, while every process sharing the
        store still computes the same hash (which is what correlation in forensics needs).
        """
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO guard_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (_SECRET_NAME, secrets.token_hex(32))
            )
            row = conn.execute("SELECT value FROM guard_meta WHERE name = ?", (_SECRET_NAME,)).fetchone()
        return bytes.fromhex(row[0])

    def hash(self, *parts: str) -> str:
        """The 32-hex-digit HMAC of ``parts`` that spans and the table record instead of raw values."""
        return validation.digest(*parts, key=self._secret)[:32]

    def idempotent(self, key_param: str = "idempotency_key", *, scope: str | None = None) -> Callable[[F], F]:
        """Decorate a sync or async tool whose ``key_param`` argument carries the idempotency key.

        ``scope`` namespaces the keys (default: the function's module and qualified name), so one key used
        with two different tools means two different requests.
        """

        def decorate(func: F) -> F:
            if hasattr(func, SPEC_ATTRIBUTE):
                raise ConfigurationError(
                    f"{func.__name__} is already instrumented: put @idempotent below @instrument_tool "
                    f"(closest to def) so replays are counted on the tool's span"
                )
            if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
                raise ConfigurationError(f"{func.__name__} is a generator: idempotency keys need one stored result")
            signature = inspect.signature(func)
            if key_param not in signature.parameters:
                raise ConfigurationError(
                    f"{func.__name__}{signature} has no parameter {key_param!r}; add it or pass key_param="
                )
            name = scope if scope is not None else f"{func.__module__}.{func.__qualname__}"
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"scope must be a non-empty string, got {scope!r}")
            guard = _Guard(self, name, key_param, signature)
            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    # The store calls can wait on SQLite's lock: keep them off the event loop
                    # (to_thread copies the context, so current_call() still finds this call).
                    ticket = await asyncio.to_thread(guard.claim, args, kwargs)
                    if ticket.answer is not None:
                        return ticket.answer
                    beat = self._heartbeat.join(guard, ticket)
                    try:
                        result = await func(*args, **kwargs)
                    except BaseException:
                        self._heartbeat.leave(beat)
                        await asyncio.to_thread(guard.release_after_failure, ticket)
                        raise
                    try:  # renewed while the result is stored, which may wait for the store
                        await asyncio.to_thread(guard.complete, ticket, result)
                    finally:
                        self._heartbeat.leave(beat)
                    return result

                return self._mark(async_wrapper, key_param)  # type: ignore[return-value]

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                ticket = guard.claim(args, kwargs)
                if ticket.answer is not None:
                    return ticket.answer
                beat = self._heartbeat.join(guard, ticket)
                try:
                    result = func(*args, **kwargs)
                except BaseException:
                    self._heartbeat.leave(beat)
                    guard.release_after_failure(ticket)
                    raise
                try:  # renewed while the result is stored, which may wait for the store
                    guard.complete(ticket, result)
                finally:
                    self._heartbeat.leave(beat)
                return result

            return self._mark(wrapper, key_param)  # type: ignore[return-value]

        return decorate

    def _mark(self, wrapper: Callable[..., Any], key_param: str) -> Callable[..., Any]:
        setattr(wrapper, KEY_PARAMETER_ATTRIBUTE, key_param)
        self._guarded.append(wrapper)
        return wrapper


class _Ticket:
    """One call's claim: either an answer to return at once, or the right to run the tool.

    ``lease_until`` is when the claim's lease ends as this process last set it (at the claim,
    then at each renewal), in the keys' clock: until then no other call can take the key over.
    """

    __slots__ = ("answer", "key_hash", "lease_until", "original_id")

    def __init__(self, answer: Any, key_hash: str = "", original_id: str = "", lease_until: float = 0.0) -> None:
        self.answer = answer
        self.key_hash = key_hash
        self.original_id = original_id
        self.lease_until = lease_until


class _Guard:
    """The per-tool half of :class:`IdempotencyKeys`: claims, replays, completes."""

    def __init__(self, keys: IdempotencyKeys, scope: str, key_param: str, signature: inspect.Signature) -> None:
        self.keys = keys
        self.scope = scope
        self.key_param = key_param
        self.signature = signature

    def claim(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Ticket:
        try:
            return self._claim(args, kwargs)
        except StoreBusy as busy:  # nothing claimed, nothing run: the caller retries
            return _Ticket(busy_refusal(busy))

    def _claim(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Ticket:
        call = current_call()
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            return _Ticket(validation.invalid(f"the call does not match {self.scope}{self.signature}: {exc}").envelope)
        bound.apply_defaults()
        arguments = bound.arguments
        try:
            key = validation.text(self.key_param, arguments.get(self.key_param))
        except BadInput as bad:
            return _Ticket(bad.envelope)
        try:
            payload = validation.canonical_payload(
                "arguments",
                {k: v for k, v in arguments.items() if k != self.key_param and k not in _SKIPPED_PARAMETERS},
            )
        except BadInput as bad:
            return _Ticket(bad.envelope)
        key_hash = self.keys.hash(self.scope, key)
        payload_hash = self.keys.hash(payload)
        call.set_attributes({c.IDEMPOTENCY_KEY_HASH: key_hash, c.IDEMPOTENCY_PAYLOAD_HASH: payload_hash})
        now = self.keys.clock()
        fresh_id = "idem_" + secrets.token_hex(10)
        with self.keys.store.transaction() as conn:
            row = conn.execute(
                "SELECT payload_hash, original_id, status, result, outcome, lease_until FROM guard_idempotency "
                "WHERE scope = ? AND key_hash = ?",
                (self.scope, key_hash),
            ).fetchone()
            if row is None or (row["status"] == _RUNNING and row["lease_until"] < now and row["payload_hash"] == payload_hash):
                conn.execute(
                    "INSERT INTO guard_idempotency (scope, key_hash, payload_hash, original_id, status, "
                    "claimed_at, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key_hash) DO UPDATE SET "
                    "payload_hash = excluded.payload_hash, original_id = excluded.original_id, status = excluded.status, "
                    "result = NULL, outcome = NULL, claimed_at = excluded.claimed_at, "
                    "lease_until = excluded.lease_until, completed_at = NULL",
                    (self.scope, key_hash, payload_hash, fresh_id, _RUNNING, now, now + self.keys.lease_seconds),
                )
                call.set_attribute(c.IDEMPOTENCY_ORIGINAL_ID, fresh_id)
                return _Ticket(None, key_hash, fresh_id, now + self.keys.lease_seconds)
        original_id = row["original_id"]
        call.set_attribute(c.IDEMPOTENCY_ORIGINAL_ID, original_id)
        if row["payload_hash"] != payload_hash:
            return _Ticket(_duplicate(original_id, row["outcome"]))
        if row["status"] == _RUNNING:
            return _Ticket(self._in_progress(original_id, row["lease_until"] - now))
        call.mark_replayed()
        return _Ticket(_replay(json.loads(row["result"]), original_id))

    def _in_progress(self, original_id: str, lease_left: float) -> dict[str, Any]:
        wait = self.keys.retry_after_seconds
        return refusal(
            c.OUTCOME_IN_PROGRESS,
            f"a call with this idempotency key is still running (original outcome id {original_id}). Do not "
            f"send it with a new key: wait {wait:g} s and retry with the same key and arguments to get its "
            f"result (if its process died, the key is freed in {max(lease_left, 0.0):.0f} s).",
            retry=True,
            retry_after_seconds=wait,
            original_id=original_id,
        )

    def renew(self, ticket: _Ticket) -> bool:
        """Push a running claim's lease out by ``lease_seconds``; False once it is no longer ours."""
        now = self.keys.clock()
        with self.keys.store.transaction() as conn:
            cursor = conn.execute(
                "UPDATE guard_idempotency SET lease_until = ? "
                "WHERE scope = ? AND key_hash = ? AND original_id = ? AND status = ? AND lease_until >= ?",
                (now + self.keys.lease_seconds, self.scope, ticket.key_hash, ticket.original_id, _RUNNING, now),
            )
        renewed = bool(cursor.rowcount == 1)
        if renewed:
            ticket.lease_until = max(ticket.lease_until, now + self.keys.lease_seconds)
        return renewed

    def release(self, ticket: _Ticket) -> None:
        """The tool raised or asked for a retry: free the key so the next call runs again."""
        with self.keys.store.transaction() as conn:
            conn.execute(
                "DELETE FROM guard_idempotency WHERE scope = ? AND key_hash = ? AND original_id = ? AND status = ?",
                (self.scope, ticket.key_hash, ticket.original_id, _RUNNING),
            )

    def release_after_failure(self, ticket: _Ticket) -> None:
        """:meth:`release` after the tool raised: never raises, so the tool's own exception is what
        the caller sees (a store that cannot be reached leaves the key to its lease: a retry then
        waits for it, and nothing was written by a tool that raised)."""
        self._persisting(lambda: self.release(ticket), ticket, f"releasing the idempotency key of {self.scope}",
                         patient=False)

    def _persisting(self, write: Callable[[], Any], ticket: _Ticket, what: str, *, patient: bool) -> Any:
        """``write()``'s value, tried again while the store is busy or its connection lost (each
        try on a fresh connection: the pool drops a dead one); None once it gives up, which is
        reported. ``patient``: until the claim's lease would end (another call could then take
        the key over and run the tool again), else one retry."""
        started = time.monotonic()
        delay = 0.05
        for attempt in itertools.count(1):
            try:
                return write()
            except StoreBusy as exc:  # StoreDisconnected included
                failure: Exception = exc
            except Exception as exc:  # StoreUnavailable (a read-only or full server) and bugs: retrying does not help
                _safe.report(c.STAGE_GUARD, what, exc)
                return None
            if patient:
                left = min(ticket.lease_until - self.keys.clock(),
                           self.keys.lease_seconds - (time.monotonic() - started))
                if left <= delay:
                    break
            elif attempt >= 2:
                break
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        _safe.report(c.STAGE_GUARD, what, failure)
        return None

    def complete(self, ticket: _Ticket, result: Any) -> None:
        """Store the tool's result under the key (or release it for a retryable refusal).

        Never raises: the write already happened, so the caller must get its result. A result
        JSON cannot hold is stored as a note (a replay then says so). A store that is busy or
        whose connection died is tried again, on a fresh connection, until the claim's lease would
        end: the key must not be left claimed while the tool's write stands, or a retry after the
        lease would run the tool a second time. When even that fails, the span says so
        (``idempotency.lease_lost``) and the failure is logged.
        """
        try:
            if isinstance(result, dict) and result.get(c.ENVELOPE_OK) is False and result.get(c.ENVELOPE_RETRY) is True:
                self._persisting(lambda: self.release(ticket), ticket,
                                 f"releasing the idempotency key of {self.scope}", patient=False)
                return
            outcome = classify_result(result).outcome
            try:
                stored = json.dumps(result, sort_keys=True, default=str)
            except (TypeError, ValueError, OverflowError, RecursionError):
                stored = json.dumps({c.ENVELOPE_OK: outcome == c.OUTCOME_OK, "result_not_stored": True,
                                     "note": "the original call ran; its result could not be stored as JSON"})
        except Exception as exc:
            _safe.report(c.STAGE_GUARD, f"storing the idempotent result of {self.scope}", exc)
            return

        def store() -> int:
            with self.keys.store.transaction() as conn:
                cursor = conn.execute(
                    "UPDATE guard_idempotency SET status = ?, result = ?, outcome = ?, completed_at = ? "
                    "WHERE scope = ? AND key_hash = ? AND original_id = ?",
                    (_DONE, stored, outcome, self.keys.clock(), self.scope, ticket.key_hash, ticket.original_id),
                )
            return int(cursor.rowcount)

        stored_rows = self._persisting(store, ticket, f"storing the idempotent result of {self.scope}", patient=True)
        if stored_rows is None:
            current_call().set_attribute(c.IDEMPOTENCY_LEASE_LOST, True)
            logger.error(
                "idempotency claim %s of %s: the tool ran but its result could not be stored before its lease "
                "ended; a retry after the lease runs the tool again",
                ticket.original_id,
                self.scope,
            )
            return
        if stored_rows != 1:
            current_call().set_attribute(c.IDEMPOTENCY_LEASE_LOST, True)
            logger.warning(
                "idempotency claim %s of %s was taken over after its lease expired; its result was not stored "
                "(raise lease_seconds above the slowest call)",
                ticket.original_id,
                self.scope,
            )


class _Heartbeat:
    """Renews the lease of every claim this process is running, from one daemon thread per
    :class:`IdempotencyKeys`, every third of ``lease_seconds``.

    A slow call therefore keeps its key while its process lives; only a dead holder's lease runs
    out. Joining and leaving is a lock and a dict operation (a thread per call would double the
    cost of a keyed call); the thread starts with the first running claim and ends at a wake-up
    that finds none. A renewal racing the end of a call changes nothing: it only touches a claim
    still running under that call's id.
    """

    def __init__(self, lease_seconds: float) -> None:
        self._interval = lease_seconds / 3
        self._lock = threading.Lock()
        self._running: dict[int, tuple[_Guard, _Ticket]] = {}
        self._thread: threading.Thread | None = None

    def join(self, guard: _Guard, ticket: _Ticket) -> int:
        """Renew ``ticket`` until :meth:`leave` is called with the returned handle."""
        handle = id(ticket)
        with self._lock:
            self._running[handle] = (guard, ticket)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="idempotency-lease-heartbeat", daemon=True)
                self._thread.start()
        return handle

    def leave(self, handle: int) -> None:
        with self._lock:
            self._running.pop(handle, None)

    def _run(self) -> None:
        while True:
            time.sleep(self._interval)
            with self._lock:
                running = list(self._running.items())
                if not running:
                    self._thread = None
                    return
            for handle, (guard, ticket) in running:
                try:
                    if not guard.renew(ticket):
                        self.leave(handle)  # taken over after all: nothing left to renew
                except StoreBusy:
                    continue  # the next beat tries again, well inside the lease
                except Exception as exc:
                    _safe.report(c.STAGE_GUARD, f"renewing the idempotency lease of {guard.scope}", exc)


def _duplicate(original_id: str, original_outcome: str | None) -> dict[str, Any]:
    state = f"outcome {original_outcome!r}" if original_outcome else "still running"
    return refusal(
        c.OUTCOME_DUPLICATE_REQUEST,
        f"this idempotency key was already used for a different request (original outcome id {original_id}, "
        f"{state}). Nothing was done. For a new request use a new key; to get the original result, resend "
        f"the original arguments with this key.",
        retry=False,
        original_id=original_id,
        original_outcome=original_outcome,
    )


def _replay(stored: Any, original_id: str) -> dict[str, Any]:
    body = dict(stored) if isinstance(stored, dict) else {c.ENVELOPE_OK: True, "result": stored}
    body[c.ENVELOPE_DEDUPLICATED] = True
    body["original_id"] = original_id
    return body

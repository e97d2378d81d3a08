"""PostgreSQL's own failure modes against a real server: a connection killed mid-transaction, a
write lock held past lock_timeout, a real serialization failure and statement timeout, a server
that is down at construction or goes down between calls, and hostile text next to placeholders.

The rest of the guards' behaviour on PostgreSQL is the shared suite, run on both stores through
the ``store_url`` fixture.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from telemetry import ConfigurationError
from telemetry import conventions as c
from telemetry.guards import (
    ABSENT_VERSION,
    Planner,
    PlanWriter,
    PostgresStore,
    StateStore,
    StoreBusy,
    StoreDisconnected,
    StoreUnavailable,
)
from telemetry.guards._postgres import WRITE_LOCK_KEY, map_error, translate_ddl
from telemetry.testing import Capture

import pg_server
from pg_server import fresh_postgres_url

BOUND_SECONDS = 60  # a join bound that only a hang reaches, never a speed assertion


@pytest.fixture
def pg_url(postgres_dsn: str) -> Iterator[str]:
    yield fresh_postgres_url(postgres_dsn)
    for store in PostgresStore.open_stores():
        store.close()


def _started(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """``fn`` running on a thread; the box receives what it returned or raised."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, box


def _finished(worker: threading.Thread, box: dict[str, Any]) -> Any:
    worker.join(BOUND_SECONDS)
    assert not worker.is_alive(), "the call hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _bounded(fn: Any) -> Any:
    """Run ``fn`` on a thread and return what it returned or raised, failing if it hangs."""
    return _finished(*_started(fn))


def _products(state: StateStore) -> dict[str, Any]:
    with state.store.read() as conn:
        return {k: v for k, v in conn.execute("SELECT key, value FROM guard_state ORDER BY key")}


def test_a_connection_killed_mid_plan_commit_applies_nothing_and_is_retryable(
    pg_url: str, postgres_dsn: str, telemetry_capture: Capture
) -> None:
    """pg_terminate_backend between a plan's writes: the commit is a retryable rate_limited refusal,
    no object changed, the plan is still committable, and the retry commits it whole."""
    state = StateStore(PostgresStore(pg_url))
    for i in range(4):
        state.write_state(f"products/p{i}", {"collection": "summer", "price": 10}, ABSENT_VERSION)
    planner = Planner(state, bindings={"policy_version": lambda: "1"})
    kill = {"armed": True}

    def reprice(writer: PlanWriter, key: str, value: Any, params: dict[str, Any]) -> None:
        writer.write(key, {**value, "price": params["price"]})
        if kill["armed"]:
            kill["armed"] = False
            with psycopg.connect(postgres_dsn, autocommit=True) as killer:
                killed = killer.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND objid = %s",
                    (WRITE_LOCK_KEY & 0xFFFFFFFF,),
                ).fetchall()
            assert killed == [(True,)]

    planner.register_action("reprice", reprice)
    before = _products(state)
    plan = planner.plan_change("reprice", "products", {"collection": "summer"}, {"price": 7})
    assert plan["ok"] is True, plan
    refused = planner.commit_plan(plan["plan_id"])
    assert refused["ok"] is False and refused["error"] == c.OUTCOME_RATE_LIMITED and refused["retry"] is True
    assert refused["retry_after_seconds"] > 0 and "lost its connection" in refused["message"]
    assert telemetry_capture.spans("commit_plan")[-1].attributes[c.TOOL_OUTCOME] == c.OUTCOME_RATE_LIMITED
    assert _products(state) == before, "a killed transaction left part of the plan applied"
    committed = planner.commit_plan(plan["plan_id"])
    assert committed["ok"] is True and committed["changed_count"] == 4
    assert all('"price":7' in value for value in _products(state).values())


def test_the_write_lock_held_past_lock_timeout_is_rate_limited(pg_url: str, telemetry_capture: Capture) -> None:
    """Another session holds the store's write lock: write_state answers rate_limited with
    retry_after_seconds after lock_timeout, writes nothing, and works once the lock is free."""
    state = StateStore(PostgresStore(pg_url, lock_timeout=0.2))
    first = state.write_state("k", 1, ABSENT_VERSION)
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK_KEY,))
        refused = _bounded(lambda: state.write_state("k", 2, first["version"]))
        holder.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK_KEY,))
    assert refused["error"] == c.OUTCOME_RATE_LIMITED and refused["retry"] is True
    assert refused["retry_after_seconds"] > 0 and "55P03" in refused["message"]
    assert telemetry_capture.spans("write_state")[-1].attributes[c.TOOL_OUTCOME] == c.OUTCOME_RATE_LIMITED
    assert state.read_state("k")["value"] == 1
    assert state.write_state("k", 2, first["version"])["ok"] is True


def _serialization_failure(url: str) -> psycopg.Error:
    """A real SQLSTATE 40001 from two SERIALIZABLE transactions that update one row."""
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE t (id int PRIMARY KEY, n int)")
        setup.execute("INSERT INTO t VALUES (1, 0)")
    one, two = psycopg.connect(url), psycopg.connect(url)
    try:
        for conn in (one, two):
            conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            conn.execute("SELECT n FROM t WHERE id = 1").fetchone()
        one.execute("UPDATE t SET n = 1 WHERE id = 1")
        one.commit()
        try:
            two.execute("UPDATE t SET n = 2 WHERE id = 1")
        except psycopg.Error as exc:
            return exc
        raise AssertionError("no serialization failure")
    finally:
        one.close()
        two.close()


def test_errors_are_mapped_by_sqlstate(pg_url: str) -> None:
    """A real serialization failure and a real statement timeout are StoreBusy (retry); a
    constraint violation stays what it is (a bug to see, not a retry)."""
    failure = _serialization_failure(pg_url)
    assert failure.sqlstate == "40001"
    busy = map_error("db", failure, 1.0)
    assert isinstance(busy, StoreBusy) and not isinstance(busy, StoreDisconnected) and "40001" in str(busy)
    store = PostgresStore(pg_url, statement_timeout=0.1)
    with pytest.raises(StoreBusy, match="57014"):
        store.query_one("SELECT pg_sleep(5)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (?, ?)", (1, 1))
    assert store.query_one("SELECT n FROM t WHERE id = ?", (1,))[0] == 1  # the store still works


def test_a_server_that_is_down_is_a_named_error_at_construction() -> None:
    """Nothing listens on the port: construction raises StoreUnavailable (cannot_connect) within
    connect_timeout, saying the connection was refused and naming the server but never the password."""
    dsn = f"postgresql://agent:s3cret-pw@127.0.0.1:{pg_server.free_port()}/crew"
    with pytest.raises(StoreUnavailable) as caught:
        _bounded(lambda: PostgresStore(dsn, connect_timeout=1))
    assert caught.value.reason == "cannot_connect"
    assert "127.0.0.1" in str(caught.value) and "refused the connection" in str(caught.value)
    assert "s3cret-pw" not in str(caught.value) and "s3cret-pw" not in caught.value.path


def test_a_server_that_goes_down_is_a_retryable_refusal_then_recovers(telemetry_capture: Capture) -> None:
    """A store whose server stops between calls answers rate_limited (retry) without hanging, and
    writes again once the server is back."""
    server = pg_server.start_server(synchronous_commit="on")  # what committed survives the crash
    try:
        state = StateStore(PostgresStore(server.dsn, connect_timeout=1))
        first = state.write_state("k", 1, ABSENT_VERSION)
        server.halt()
        answers = [_bounded(lambda: state.write_state("k", 2, first["version"])) for _ in range(2)]
        for answer in answers:  # a broken pooled connection, then no connection to be had
            assert answer["error"] == c.OUTCOME_RATE_LIMITED and answer["retry"] is True, answer
        assert [s.attributes[c.TOOL_OUTCOME] for s in telemetry_capture.spans("write_state")[-2:]] == [
            c.OUTCOME_RATE_LIMITED
        ] * 2
        server.resume()
        again = state.write_state("k", 2, first["version"])
        assert again["ok"] is True, again
        state.store.close()  # type: ignore[attr-defined]
    finally:
        server.stop()


@pytest.mark.parametrize("key", ["k'); DROP TABLE guard_state; --", "100% off ?", "%s%s?", 'quote"d', "é\u202eeverse"])
def test_hostile_keys_are_bound_values(pg_url: str, key: str) -> None:
    """Keys with quotes, placeholders and percent signs are stored and read back as themselves."""
    state = StateStore(PostgresStore(pg_url))
    written = state.write_state(key, {"note": key}, ABSENT_VERSION)
    assert written["ok"] is True
    assert state.read_state(key)["value"] == {"note": key}
    assert state.store.query_one("SELECT count(*) FROM guard_state")[0] == 1


def test_bad_dsn_and_options_are_refused_up_front() -> None:
    """A DSN that is not one, or a timeout that is not a number of seconds, is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="connection string"):
        PostgresStore("")
    with pytest.raises(ConfigurationError, match="postgresql://"):
        PostgresStore("host=127.0.0.1 port=notanumber =")
    with pytest.raises(ConfigurationError, match="lock_timeout"):
        PostgresStore("postgresql://u@127.0.0.1/db", lock_timeout=0)


def test_guard_ddl_keeps_sqlite_meanings() -> None:
    """REAL stays 8 bytes, a rowid key becomes an identity, text compares bytewise."""
    ddl = translate_ddl("CREATE TABLE x (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, k TEXT, n INTEGER)")
    assert ddl == (
        'CREATE TABLE x (seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, at DOUBLE PRECISION NOT NULL, '
        'k TEXT COLLATE "C", n BIGINT)'
    )


def _wait_for_a_writer_queued_on_the_write_lock(url: str) -> None:
    """Poll the server (bounded) until some session waits for the write lock: the write under test
    has reached its lock, which is the moment the race needs."""
    with psycopg.connect(url, autocommit=True) as watcher:
        for _ in range(BOUND_SECONDS * 20):
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = %s",
                (WRITE_LOCK_KEY & 0xFFFFFFFF,),
            ).fetchone()
            if waiting is not None and waiting[0] > 0:
                return
            threading.Event().wait(0.05)
    raise AssertionError("no write ever waited for the write lock")


def test_a_write_waits_for_an_exclusive_transaction_and_rechecks_the_version(pg_url: str) -> None:
    """write_state is one statement that takes the write lock inside itself: while an exclusive
    transaction (a plan commit, a forced write) holds the lock and moves the key, the write waits,
    then re-checks against what committed and is refused stale, with no change-log row of its own."""
    from telemetry.guards._state import put

    state = StateStore(PostgresStore(pg_url))
    base = state.write_state("k", 1, ABSENT_VERSION)["version"]
    other = state.write_state("untouched", 1, ABSENT_VERSION)["version"]
    release = threading.Event()

    def exclusive() -> str | None:
        with state.store.transaction() as conn:
            moved = put(conn, "k", "2", base, actor="plan")
            created = put(conn, "new", "2", ABSENT_VERSION, actor="plan")
            assert created is not None
            release.wait(BOUND_SECONDS)
        return moved

    holder, held = _started(exclusive)
    try:
        # The exclusive transaction holds the lock once it has written "new".
        for _ in range(BOUND_SECONDS * 20):
            with psycopg.connect(pg_url, autocommit=True) as probe:
                if probe.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' "
                    "AND objid = %s", (WRITE_LOCK_KEY & 0xFFFFFFFF,),
                ).fetchone()[0]:
                    break
            threading.Event().wait(0.05)
        stale, stale_box = _started(lambda: state.write_state("k", 3, base))
        _wait_for_a_writer_queued_on_the_write_lock(pg_url)
        create, create_box = _started(lambda: state.write_state("new", 3, ABSENT_VERSION))
        beside, beside_box = _started(lambda: state.write_state("untouched", 3, other))
    finally:
        release.set()
    moved = _finished(holder, held)
    refused, refused_create, accepted = (_finished(t, b) for t, b in ((stale, stale_box), (create, create_box), (beside, beside_box)))
    assert refused["error"] == c.OUTCOME_REJECTED_STALE_VERSION and refused["current_version"] == moved
    assert refused["current_value"] == 2
    assert refused_create["error"] == c.OUTCOME_REJECTED_STALE_VERSION and refused_create["current_value"] == 2
    assert accepted["ok"] is True  # a write of another key went through once the lock was free
    logged = state.store.query_one("SELECT count(*) FROM guard_changes WHERE key = ? AND actor IS NULL", ("k",))
    assert logged[0] == 1, "only the first write of k (not the refused one) is in the change log"


def test_a_store_opened_while_writes_wait_on_the_lock_neither_deadlocks_nor_fails(pg_url: str) -> None:
    """A worker starting up (creating the guards' tables if need be) while another's write waits
    for the write lock: the table creation waits for the write, the write for the lock, and both
    finish once the lock is free (DDL under the write lock would be a deadlock here)."""
    state = StateStore(PostgresStore(pg_url))
    base = state.write_state("k", 1, ABSENT_VERSION)["version"]
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK_KEY,))
        try:
            write, write_box = _started(lambda: state.write_state("k", 2, base))
            _wait_for_a_writer_queued_on_the_write_lock(pg_url)
            opened, opened_box = _started(lambda: StateStore(PostgresStore(pg_url)))
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK_KEY,))
        assert _finished(write, write_box)["ok"] is True
    late = _finished(opened, opened_box)
    assert late.read_state("k")["value"] == 2


def test_the_pool_is_bounded_and_a_wait_past_connect_timeout_is_rate_limited(pg_url: str) -> None:
    """max_connections bounds a process's sessions however many threads write; when every one
    stays in use past connect_timeout, a write answers rate_limited (retry) and writes nothing."""
    # 2 s, not less: on a loaded machine 8 threads sharing 2 sessions waited past shorter timeouts,
    # so the first half failed at random.
    store = PostgresStore(pg_url, max_connections=2, connect_timeout=2.0)
    state = StateStore(store)
    for i in range(8):
        state.write_state(f"k{i}", 0, ABSENT_VERSION)
    workers = [_started(lambda i=i: [state.write_state(f"k{i}", n + 1, state.read_state(f"k{i}")["version"])
                                     for n in range(20)]) for i in range(8)]
    for worker, box in workers:
        assert all(answer["ok"] for answer in _finished(worker, box))
    with psycopg.connect(pg_url, autocommit=True) as watcher:
        sessions = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]
    assert sessions <= 2
    version = state.read_state("k0")["version"]
    # The refused write waits connect_timeout once, so it is made through a store of the same
    # bound with a short one; its two connections are opened first, so that "no idle connection"
    # below means both are held.
    short = PostgresStore(pg_url, max_connections=2, connect_timeout=0.3)
    short_state = StateStore(short)
    with short.transaction(), short.read():
        pass
    release = threading.Event()

    def hold() -> None:
        with short.transaction(), short.read():
            release.wait(BOUND_SECONDS)

    holder, held = _started(hold)
    try:
        _wait_for(lambda: short._pool._idle == [], "both connections checked out")  # type: ignore[attr-defined]
        refused = _bounded(lambda: short_state.write_state("k0", 99, version))
    finally:
        release.set()
    _finished(holder, held)
    assert refused["error"] == c.OUTCOME_RATE_LIMITED and refused["retry"] is True
    assert "connect_timeout" in refused["message"]
    assert state.read_state("k0")["value"] == 20


def _wait_for(condition: Any, what: str) -> None:
    for _ in range(BOUND_SECONDS * 20):
        if condition():
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"never: {what}")

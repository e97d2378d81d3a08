"""Connections that die under the guards, on a real PostgreSQL server: a backend killed
(``pg_terminate_backend``) or the server stopped while an idempotent tool runs, pooled connections
left dead by a restart, and logins refused for a reason the message must name.

What must hold: a tool that ran has its result stored (a retry after the lease replays it, never
charges twice); a tool that raised is what its caller catches; a restart costs no call; a DSN
error says what is wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from telemetry.guards import ABSENT_VERSION, IdempotencyKeys, PostgresStore, StateStore, StoreUnavailable

import pg_server
from pg_server import fresh_postgres_url


class CardDeclined(Exception):
    """The tool's own failure, which its caller catches by name."""


@pytest.fixture
def pg_url(postgres_dsn: str) -> Iterator[str]:
    yield fresh_postgres_url(postgres_dsn)
    for store in PostgresStore.open_stores():
        store.close()


def _kill(dsn: str, pid: int) -> None:
    """End the session ``pid`` the way an operator, a failover or an OOM kill does, and wait until it is gone."""
    with psycopg.connect(dsn, autocommit=True) as killer:
        assert killer.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,)).fetchone() == (True,)


def _expire_running_claims(store: PostgresStore) -> None:
    """Make every claim still running look like one whose holder died (its lease is over), so the
    next call may take it over: what a retry after the lease would find, without sleeping."""
    with store.transaction() as conn:
        conn.execute("UPDATE guard_idempotency SET lease_until = 0 WHERE status = 'running'")


class Charges:
    """A non-idempotent charge behind an idempotency key; ``during`` runs inside the tool."""

    def __init__(self, keys: IdempotencyKeys) -> None:
        self.runs: list[int] = []
        self.during: Any = None
        self.decline = False

        @keys.idempotent()
        def charge(amount_cents: int, idempotency_key: str) -> dict[str, Any]:
            self.runs.append(amount_cents)
            if self.during is not None:
                self.during()
            if self.decline:
                raise CardDeclined("card declined")
            return {"ok": True, "charge_id": f"ch_{len(self.runs)}"}

        self.charge = charge


def test_a_backend_killed_while_the_tool_runs_still_stores_its_result(pg_url: str, postgres_dsn: str) -> None:
    """pg_terminate_backend on the store's only pooled connection while the charge runs: the
    result is stored on a fresh connection, so a retry after the lease replays it (one charge),
    where it used to fail on the dead connection and leave the key claimed for a second charge."""
    store = PostgresStore(pg_url, max_connections=1)
    charges = Charges(IdempotencyKeys(store))
    pid = store.query_one("SELECT pg_backend_pid()")[0]
    charges.during = lambda: _kill(postgres_dsn, pid)
    first = charges.charge(500, idempotency_key="order-1")
    assert first == {"ok": True, "charge_id": "ch_1"}
    charges.during = None
    _expire_running_claims(store)
    again = charges.charge(500, idempotency_key="order-1")
    assert again.get("deduplicated") is True and again["charge_id"] == "ch_1", again
    assert charges.runs == [500], "the charge ran twice"
    assert store.query_one("SELECT pg_backend_pid()")[0] != pid


def test_a_backend_killed_before_the_tool_raises_leaves_the_tools_exception(pg_url: str, postgres_dsn: str) -> None:
    """The tool raises its own exception after its connection died: the caller catches that
    exception (not StoreDisconnected), and the key is free for the retry."""
    store = PostgresStore(pg_url, max_connections=1)
    charges = Charges(IdempotencyKeys(store))
    pid = store.query_one("SELECT pg_backend_pid()")[0]
    charges.during, charges.decline = (lambda: _kill(postgres_dsn, pid)), True
    with pytest.raises(CardDeclined):
        charges.charge(500, idempotency_key="order-2")
    charges.during, charges.decline = None, False
    assert charges.charge(500, idempotency_key="order-2") == {"ok": True, "charge_id": "ch_2"}


def test_a_server_stopped_while_the_tool_runs() -> None:
    """The whole server goes down during the charge and comes back 1.5 s later: storing the
    result waits for it (within the lease) and succeeds, so the retry replays it. A charge that
    raises while the server is down still raises its own exception, at once."""
    server = pg_server.start_server(synchronous_commit="on")
    try:
        store = PostgresStore(server.dsn, connect_timeout=1)
        charges = Charges(IdempotencyKeys(store, lease_seconds=60))
        back: list[threading.Thread] = []

        def outage() -> None:
            server.halt()
            restart = threading.Timer(1.5, server.resume)
            restart.start()
            back.append(restart)

        charges.during = outage
        assert charges.charge(700, idempotency_key="order-3") == {"ok": True, "charge_id": "ch_1"}
        back[0].join(60)
        charges.during = None
        _expire_running_claims(store)
        again = charges.charge(700, idempotency_key="order-3")
        assert again.get("deduplicated") is True and charges.runs == [700], again

        charges.during, charges.decline = server.halt, True
        with pytest.raises(CardDeclined):
            charges.charge(900, idempotency_key="order-4")
        server.resume()
        store.close()
    finally:
        server.stop()


def test_pooled_connections_survive_a_server_restart() -> None:
    """Three pooled connections, then a restart: the next calls all succeed (each pooled
    connection used to fail one call before the pool replaced it)."""
    server = pg_server.start_server(synchronous_commit="on")
    try:
        store = PostgresStore(server.dsn, max_connections=3, connect_timeout=2)
        state = StateStore(store)
        version = state.write_state("k", 0, ABSENT_VERSION)["version"]
        with store.transaction(), store.read(), store.read():  # three connections, all back in the pool after
            pass
        server.halt()
        server.resume()
        for n in range(1, 5):
            answer = state.write_state("k", n, version)
            assert answer["ok"] is True, answer
            version = answer["version"]
        assert state.read_state("k")["value"] == 4
        store.close()
    finally:
        server.stop()


def test_login_failures_are_named_by_their_cause(postgres_dsn: str) -> None:
    """An unknown role, an unknown database and a port nothing listens on each say what is wrong
    (with the SQLSTATE the server logs), not all 'could not be reached within connect_timeout'."""
    base = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    host, port = base.get("host", "127.0.0.1"), base.get("port", "5432")
    cases = {
        f"postgresql://nosuchrole@{host}:{port}/postgres": ("permission", ["no role 'nosuchrole'", "28000"]),
        f"postgresql://postgres@{host}:{port}/nosuchdb": ("cannot_open", ["no database 'nosuchdb'", "3D000"]),
        f"postgresql://postgres@127.0.0.1:{pg_server.free_port()}/postgres": ("cannot_connect",
                                                                              ["refused the connection"]),
    }
    for dsn, (reason, words) in cases.items():
        with pytest.raises(StoreUnavailable) as caught:
            PostgresStore(dsn, connect_timeout=2)
        assert caught.value.reason == reason, (dsn, str(caught.value))
        assert all(word in str(caught.value) for word in words), (dsn, str(caught.value))
        assert "could not be reached" not in str(caught.value)

"""PostgreSQL failures mapped onto the guards' store exceptions by SQLSTATE, never by class.

The SQLSTATE is the server's own classification of an error (https://www.postgresql.org/docs/
current/errcodes-appendix.html): conflicts and timeouts a retry resolves become
:class:`StoreBusy`; a connection that died (or a server shutting down) becomes
:class:`StoreDisconnected`; a server that cannot do the work at all becomes
:class:`StoreUnavailable` naming what to fix. Anything else (a constraint violation, a
programming error) is returned unchanged, to surface as the bug it is.
"""

from __future__ import annotations

import re

from ._store import StoreBusy, StoreDisconnected, StoreUnavailable

RETRY_AFTER_SECONDS = 1.0

_BUSY = {
    "40001": "lost a serialization conflict with a concurrent transaction",
    "40P01": "was chosen as a deadlock victim",
    "55P03": "waited past lock_timeout for a lock another writer held",
    "57014": "ran past statement_timeout (a long transaction may hold the write lock)",
    "53300": "has no free connection slot (too many connections)",
}
_DISCONNECTED_CLASSES = ("08",)  # connection exceptions
_DISCONNECTED = {"57P01", "57P02", "57P03", "57P05", "25P03"}  # shutdown, crash, starting up, idle timeouts
_UNAVAILABLE = {
    "25006": ("read_only", "is read-only (a standby or default_transaction_read_only): point the store at the primary"),
    "42501": ("permission", "denies this user the statement: grant it CREATE and read/write on the schema"),
    "53100": ("full", "is on a full disk: free space on the server"),
    "53200": ("full", "ran out of memory"),
    "58030": ("io_error", "hit an I/O error: check the server's disk"),
    "XX001": ("corrupt", "reports corrupt data: restore from a backup"),
    "XX002": ("corrupt", "reports a corrupt index: REINDEX it"),
    "3D000": ("cannot_open", "has no such database: create it first"),
}
_UNAVAILABLE_CLASSES = {"28": ("permission", "refused the login: check the user and password")}


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error, or None (a client-side failure has none)."""
    code = getattr(exc, "sqlstate", None)
    return code if isinstance(code, str) else None


def _first_line(exc: BaseException) -> str:
    """The first line of the server's message (its detail lines are for logs), or the class name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _unavailable(code: str | None) -> tuple[str, str] | None:
    """``(reason, what is wrong)`` when ``code`` says the server cannot do the work at all."""
    return _UNAVAILABLE.get(code or "") or _UNAVAILABLE_CLASSES.get((code or "")[:2])


def _is_psycopg_error(exc: BaseException) -> bool:
    return any(cls.__module__.startswith("psycopg") for cls in type(exc).__mro__ if cls.__name__ == "Error")


def mapped(path: str, exc: BaseException, lock_timeout: float) -> BaseException:
    """The guards' exception for a PostgreSQL failure; ``exc`` itself when it is not one."""
    if not _is_psycopg_error(exc):
        return exc
    code = sqlstate(exc)
    first = _first_line(exc)
    if code in _BUSY:
        return StoreBusy(
            path, exc, waited_seconds=lock_timeout, retry_after_seconds=RETRY_AFTER_SECONDS,
            message=f"the guard store {path} {_BUSY[code]} (SQLSTATE {code}: {first}); nothing was written: retry",
        )
    client_side = code is None and type(exc).__name__ in ("OperationalError", "InterfaceError")
    if code in _DISCONNECTED or (code or "")[:2] in _DISCONNECTED_CLASSES or client_side:
        outcome = (
            "the server applies a transaction whole or not at all, so nothing was half-applied (had it died at "
            "COMMIT, the write may have landed whole: a retried compare-and-set then answers rejected_stale_version)"
        )
        return StoreDisconnected(
            path, exc, waited_seconds=0.0, retry_after_seconds=RETRY_AFTER_SECONDS,
            message=f"the guard store {path} lost its connection ({code or 'no SQLSTATE'}: {first}); {outcome}: retry",
        )
    known = _unavailable(code)
    if known is not None:
        reason, what = known
        return StoreUnavailable(path, reason, f"the guard store {path} {what} (SQLSTATE {code}: {first}); nothing was written")
    return exc


def unreachable(path: str, cause: BaseException, connect_timeout: float) -> StoreDisconnected:
    """No connection could be had within ``connect_timeout``: the server is down or saturated."""
    return StoreDisconnected(
        path, cause, waited_seconds=connect_timeout, retry_after_seconds=RETRY_AFTER_SECONDS,
        message=f"the guard store {path} could not be reached within connect_timeout={connect_timeout:g} s ({cause}); "
        f"nothing was written: retry once the server answers",
    )


# What refused a connection, read from libpq's message: a login the server refuses carries no
# SQLSTATE on the client (there is no result to hold one), so the server's FATAL text (and
# libpq's own, for what never reached a server) is matched, and each is named with the SQLSTATE
# the server logs for it. A server configured with lc_messages other than English falls through
# to the generic message, which still quotes the server's words.
_CONNECT_FAILURES: tuple[tuple[re.Pattern[str], str, str | None, str], ...] = (
    (re.compile(r'role "([^"]*)" does not exist'), "permission", "28000",
     "has no role {0!r}: create it (CREATE ROLE ... LOGIN) or correct the user in the DSN"),
    (re.compile(r'database "([^"]*)" does not exist'), "cannot_open", "3D000",
     "has no database {0!r}: create it (CREATE DATABASE) or correct the database in the DSN"),
    (re.compile(r'password authentication failed for user "([^"]*)"'), "permission", "28P01",
     "refused the password of user {0!r}: check the password (the DSN, PGPASSWORD or ~/.pgpass)"),
    (re.compile(r"no pg_hba\.conf entry"), "permission", "28000",
     "does not let this host, user and database in (no pg_hba.conf entry): add one on the server"),
    (re.compile(r'role "([^"]*)" is not permitted to log in'), "permission", "28000",
     "does not let role {0!r} log in: ALTER ROLE ... LOGIN"),
    (re.compile(r"too many (?:connections|clients)"), "cannot_connect", "53300",
     "has no free connection slot (max_connections): close idle sessions or raise the limit"),
    (re.compile(r"the database system is (?:starting up|in recovery mode|shutting down)"), "cannot_connect", "57P03",
     "is starting up or shutting down: retry once it accepts connections"),
    (re.compile(r"Connection refused"), "cannot_connect", None,
     "refused the connection (nothing listens at that address and port): check the port and that the server runs"),
    (re.compile(r"failed to resolve host|could not translate host name|Name or service not known"),
     "cannot_connect", None, "has a host name that does not resolve: check the host in the DSN"),
    (re.compile(r"SSL"), "cannot_connect", None,
     "could not agree on SSL with this client: check sslmode in the DSN against the server's ssl setting"),
)


def connect_failure(exc: BaseException) -> tuple[str, str | None, str] | None:
    """``(reason, SQLSTATE or None, what is wrong)`` for a failed connection libpq named, or None."""
    text = str(exc)
    for pattern, reason, code, what in _CONNECT_FAILURES:
        found = pattern.search(text)
        if found:
            return reason, code, what.format(*found.groups())
    return None


def cannot_connect(path: str, exc: BaseException, connect_timeout: float) -> StoreUnavailable:
    """The construction-time error for a server that refused or did not answer the first connection."""
    code = sqlstate(exc)
    first = _first_line(exc)
    known = _unavailable(code)
    if known is not None:
        reason, what = known
        return StoreUnavailable(path, reason, f"the guard store {path} {what} (SQLSTATE {code}: {first})")
    named = connect_failure(exc)
    if named is not None:
        reason, code, what = named
        where = f"SQLSTATE {code}: {first}" if code else first
        return StoreUnavailable(path, reason, f"the guard store {path} {what} ({where})")
    return StoreUnavailable(
        path,
        "cannot_connect",
        f"the guard store {path} could not be reached within connect_timeout={connect_timeout:g} s ({first}): "
        f"check that the server is running, that the address, port, user and database are right, and that "
        f"this host may connect",
    )

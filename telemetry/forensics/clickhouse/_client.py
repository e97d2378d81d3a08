"""Connect to ClickHouse (over HTTP through ``clickhouse-connect``, in process through chDB alone)
and turn every failure into a named error.

The URL says where and as whom: ``http://USER@HOST:8123/DATABASE`` (``https://`` for TLS; its
query string carries ``verify=0``, ``ca_cert=PATH``, ``connect_timeout=S``, ``query_timeout=S``
and any ClickHouse setting, e.g. ``?max_execution_time=120``), or ``chdb:///PATH`` for a chDB
data directory in process (``outcome-telemetry[chdb]``). The password never travels in the URL or
on a command line: it is read from an environment variable (``CLICKHOUSE_PASSWORD`` unless told
otherwise), and it is removed from every message this module raises.

Spans stream as Arrow batches either way: over HTTP from clickhouse-connect's raw stream (read
here, so that a server's error at the end of a part-sent body can be named), in process from a
chDB handle (clickhouse-connect's chDB client would hold a whole result first, and a chDB read
needs nothing else of it), read a few batches ahead in a thread of its own.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from ..._extras import require
from ...exceptions import (
    ClickHouseAuthError,
    ClickHouseInputError,
    ClickHouseTableMissing,
    ClickHouseUnreachable,
)
from ._parameters import chdb_parameters
from ._read_ahead import ReadAhead
from ._select import IDENTIFIER, SpansSelect, columns_select

__all__ = [
    "CHDB_BATCH_ROWS",
    "CONNECT_TIMEOUT_S",
    "DEFAULT_DATABASE",
    "PASSWORD_ENV",
    "QUERY_TIMEOUT_S",
    "ClickHouseConnection",
    "Target",
    "connect",
    "error_for",
    "parse_url",
    "require_driver",
]

PASSWORD_ENV = "CLICKHOUSE_PASSWORD"
"""The environment variable the password is read from by default."""
DEFAULT_DATABASE = "otel"
"""The clickhouseexporter's default database."""
CONNECT_TIMEOUT_S = 10.0
QUERY_TIMEOUT_S = 300.0
_CONNECTION_OPTIONS = frozenset({"verify", "ca_cert", "connect_timeout", "query_timeout"})
_AUTH_CODES = frozenset({192, 193, 194, 497, 516})
"""UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, ACCESS_DENIED, AUTHENTICATION_FAILED."""
_MISSING_CODES = frozenset({60, 81})
"""UNKNOWN_TABLE, UNKNOWN_DATABASE."""
_TIMEOUT_CODES = frozenset({159, 209, 210})
"""TIMEOUT_EXCEEDED, SOCKET_TIMEOUT, NETWORK_ERROR."""
_CODE = re.compile(r"Code: (\d+)")
_ARROW_STRINGS = {"output_format_arrow_string_as_string": "1"}
"""What every read asks of ClickHouse's Arrow output: String columns as Arrow text, not binary."""
_HTTP_DENIED = re.compile(r"\b(401|403)\b")


@dataclass(frozen=True)
class Target:
    """A parsed ClickHouse URL (the password is not part of it)."""

    scheme: str
    host: str
    port: int | None
    user: str | None
    database: str
    path: str = ""
    options: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def in_process(self) -> bool:
        """A chDB data directory read in this process (``chdb://``), not a server over HTTP."""
        return self.scheme == "chdb"

    @property
    def label(self) -> str:
        """The URL as it may be shown: no password, no settings."""
        if self.in_process:
            return f"chdb://{self.path}"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{self.scheme}://{user}{self.host}{port}/{self.database}"


def parse_url(url: str) -> Target:
    """Parse ``url``; refuse a password in it, an unknown scheme or a setting that is no identifier."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ClickHouseInputError(f"the ClickHouse URL is not a URL ({exc}); e.g. http://reader@host:8123/otel") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "chdb"):
        raise ClickHouseInputError(
            f"the ClickHouse URL must start with http://, https:// or chdb:// (not {scheme or 'nothing'}://); "
            "e.g. https://reader@clickhouse.example:8443/otel")
    if parts.password is not None:
        raise ClickHouseInputError(
            f"the ClickHouse URL holds a password; remove it and put it in ${PASSWORD_ENV} (or the variable "
            "--password-env names), so it stays out of shell history and process lists")
    options: dict[str, str] = {}
    settings: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _CONNECTION_OPTIONS:
            options[key] = value
        elif IDENTIFIER.fullmatch(key):
            settings[key] = value
        else:
            raise ClickHouseInputError(f"the ClickHouse URL has a setting {key!r} that is not a setting name")
    if scheme == "chdb":
        _chdb_can_carry(settings)
        return Target("chdb", "", None, None, DEFAULT_DATABASE, path=unquote(parts.path) or ":memory:",
                      options=options, settings=settings)
    if not parts.hostname:
        raise ClickHouseInputError("the ClickHouse URL names no host; e.g. http://reader@localhost:8123/otel")
    database = unquote(parts.path.strip("/")) or DEFAULT_DATABASE
    return Target(scheme, parts.hostname, port, unquote(parts.username) if parts.username else None,
                  database, options=options, settings=settings)


def _chdb_can_carry(settings: Mapping[str, str]) -> None:
    """Refuse a setting chDB would not receive as written: its connection string splits values on
    ``&`` (even when encoded), ends them at a NUL, and reads an empty one as 1."""
    for name, value in settings.items():
        if value == "" or "&" in value or "\x00" in value:
            raise ClickHouseInputError(
                f"the chdb:// URL's setting {name}={value!r} would not reach chDB as written (it cuts a value "
                "at '&' or a NUL and reads an empty one as 1); give a value without them")


def _seconds(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ClickHouseInputError(f"the ClickHouse URL's {name}={raw!r} is not a positive number of seconds")
    return value


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def error_for(exc: BaseException, target: Target, password: str | None, doing: str) -> ClickHouseInputError:
    """The named error for a clickhouse-connect or chDB failure while ``doing`` something."""
    message = _redact(str(exc), password).strip()
    first = message.splitlines()[0] if message else type(exc).__name__
    match = _CODE.search(message)
    code = int(match.group(1)) if match else None
    where = target.label
    if code in _AUTH_CODES or (code is None and _HTTP_DENIED.search(message)):
        return ClickHouseAuthError(
            f"{where} refused the credentials while {doing} ({first}); check the user in the URL and the "
            f"password in ${PASSWORD_ENV} (or the variable --password-env names)")
    if code in _MISSING_CODES:
        return ClickHouseTableMissing(f"{where}: {first}; check --table and the database in the URL")
    if code in _TIMEOUT_CODES or (code is None and not target.in_process and _is_connection_error(exc)):
        return ClickHouseUnreachable(
            f"no answer from {where} while {doing} ({first}); check the host, port and scheme (https for "
            "TLS), that the server is up, or raise connect_timeout/query_timeout in the URL")
    return ClickHouseInputError(f"{where} refused the query while {doing}: {first}")


def _is_connection_error(exc: BaseException) -> bool:
    try:
        from clickhouse_connect.driver.exceptions import OperationalError
    except ImportError:  # pragma: no cover - the caller imported it already
        return False
    return isinstance(exc, (OperationalError, OSError))


class ClickHouseConnection:
    """One client, with the target it reaches (for messages) and its password: a clickhouse-connect
    client over HTTP, a chDB handle in process."""

    def __init__(self, client: Any, target: Target, password: str | None):
        self.client = client
        self.target = target
        self._password = password

    @property
    def label(self) -> str:
        return self.target.label

    def error(self, exc: BaseException, doing: str) -> ClickHouseInputError:
        return error_for(exc, self.target, self._password, doing)

    def columns(self, database: str, table: str) -> dict[str, str]:
        """``database.table``'s columns and their types (empty when there is no such table)."""
        select = columns_select(database, table)
        params = chdb_parameters(select.parameters, select.types) if self.target.in_process else {}
        try:
            if self.target.in_process:
                text = self.client.query(select.sql, "JSONCompactEachRow", params=params).bytes()
                rows = [json.loads(line) for line in text.decode("utf-8").splitlines() if line]
            else:
                rows = self.client.query(select.sql, parameters=select.parameters).result_rows
        except Exception as exc:
            raise self.error(exc, f"reading the columns of {database}.{table}") from None
        return {str(name): str(type_name) for name, type_name in rows}

    def stream(self, select: SpansSelect, doing: str) -> AbstractContextManager[Iterator[Any]]:
        """The rows of ``select`` as Arrow record batches, streamed (closed when the block ends)."""
        if self.target.in_process:
            return self._chdb_stream(select, doing)
        return self._http_stream(select, doing)

    @contextmanager
    def _http_stream(self, select: SpansSelect, doing: str) -> Iterator[Iterator[Any]]:
        try:
            response = self.client.raw_stream(select.sql, parameters=select.parameters, fmt="ArrowStream",
                                              settings=dict(_ARROW_STRINGS))
        except Exception as exc:
            raise self.error(exc, doing) from None
        body = _KeptTail(response)
        try:
            yield _batches(body, self, doing)
        finally:
            _close_quietly(response)  # drops the connection of a body not read to its end

    @contextmanager
    def _chdb_stream(self, select: SpansSelect, doing: str) -> Iterator[Iterator[Any]]:
        """chDB's own streamed query, in batches of :data:`CHDB_BATCH_ROWS` as the engine makes them.

        Streamed on the connection's chDB handle (the URL's settings ride in its connection string,
        never in the SQL), so the loader types rows while the engine still reads; clickhouse-connect's
        chDB backend would read the whole ``ArrowStream`` result before handing over its first
        batch. chDB makes a block only when asked for one, so a thread of the read's own asks
        (:class:`~._read_ahead.ReadAhead`, two batches ahead) while DuckDB types the last. The
        parameters go as the text of their declared types (:mod:`._parameters`)."""
        params = chdb_parameters(select.parameters, select.types)
        try:
            result = self.client.send_query(select.sql, "Arrow", params=params)
        except Exception as exc:
            raise self.error(exc, doing) from None
        try:
            with ReadAhead(_chdb_batches(result, self, doing)) as batches:
                yield batches
        finally:
            _close_quietly(result)  # cancels a query not read to its end (the reader has stopped)

    def close(self) -> None:
        _close_quietly(self.client)


class _KeptTail:
    """A response body read as a file, keeping its last :data:`KEPT_TAIL_BYTES` bytes.

    A server that fails part-way through a streamed result has already sent its status and some
    Arrow batches; it ends the body with its error text (ClickHouse 25.11 and later between
    ``__exception__`` markers). Arrow reads that text as a batch's length and reports only that the
    bytes ran short, so the reader keeps what it last read to name the server's own error instead."""

    def __init__(self, response: Any):
        self._response = response
        self.tail = bytearray()
        self.closed = False

    def read(self, size: int | None = -1) -> bytes:
        data: bytes = self._response.read(None if size is None or size < 0 else size)
        self.tail += data[-KEPT_TAIL_BYTES:]
        del self.tail[:-KEPT_TAIL_BYTES]
        return data

    def server_error(self) -> str | None:
        """The server's error text at the end of the body (read on to its end, within bounds)."""
        try:
            self.tail += self._response.read(KEPT_TAIL_BYTES)
        except Exception:  # the connection may be gone; what was kept still names the error
            pass
        text = bytes(self.tail[-KEPT_TAIL_BYTES:]).decode("utf-8", errors="replace")
        start = _SERVER_ERROR.search(text)
        if start is None:
            return None
        return text[start.start():].split("\n", 1)[0].strip()


KEPT_TAIL_BYTES = 64 * 1024
_SERVER_ERROR = re.compile(r"Code: \d+\. DB::Exception:")


def _batches(body: _KeptTail, connection: ClickHouseConnection, doing: str) -> Iterator[Any]:
    """Each Arrow batch of the body; a failure mid-stream becomes a named error, in the server's
    words where it sent any."""
    import pyarrow as pa

    try:
        reader = pa.ipc.open_stream(body)
        yield from reader
    except Exception as exc:
        said = body.server_error()
        raise connection.error(RuntimeError(said) if said else exc, doing) from None


CHDB_BATCH_ROWS = 8_192
"""The fewest rows an Arrow batch read from chDB in process holds: a block of at least this many
(a granule) passes as it is, smaller ones are gathered (DuckDB pays per batch)."""


def _chdb_connection_string(target: Target) -> str:
    """The engine path as clickhouse-connect's chDB client spells it (chDB compares paths
    literally, so every handle on one engine must name it alike), with the URL's settings and
    the read's own."""
    path = target.path if target.path.startswith(":memory:") else os.path.realpath(target.path)
    return f"{path}?{urlencode({**target.settings, **_ARROW_STRINGS})}"


def _close_quietly(thing: Any) -> None:
    """Close a client, response, chDB result or handle; a failure to close (a dead connection) is
    not worth hiding the read's outcome for."""
    if thing is not None:
        try:
            thing.close()
        except Exception:
            pass


def _chdb_batches(result: Any, connection: ClickHouseConnection, doing: str) -> Iterator[Any]:
    """Each Arrow batch of a chDB streamed result; a failure mid-stream becomes a named error."""
    try:
        yield from result.record_batch(rows_per_batch=CHDB_BATCH_ROWS)
    except Exception as exc:
        raise connection.error(exc, doing) from None


def _existing_data_directory(path: str) -> None:
    """Refuse a chDB data directory that is not there: chDB would create an empty one and every
    read would then say "no table", leaving a stray folder behind a mistyped path."""
    if path == ":memory:":
        return
    if not os.path.exists(path):
        raise ClickHouseInputError(
            f"chdb://{path}: no chDB data directory there (nothing was created); name the folder the chDB "
            "that holds the spans keeps its data in, e.g. chdb:///var/lib/otel/chdb")
    if not os.path.isdir(path):
        raise ClickHouseInputError(f"chdb://{path} is a file, not a chDB data directory; name its folder")


def connect(url: str, *, password_env: str = PASSWORD_ENV, environ: Mapping[str, str] | None = None) -> ClickHouseConnection:
    """Open a client for ``url``, with the password from ``password_env``, and check it answers."""
    target = parse_url(url)
    connect_timeout = _seconds(target.options, "connect_timeout", CONNECT_TIMEOUT_S)  # refused for chdb:// too,
    query_timeout = _seconds(target.options, "query_timeout", QUERY_TIMEOUT_S)  # though nothing waits there
    driver = require_driver(target)
    if target.in_process:
        return _connect_chdb(driver, target)
    env = os.environ if environ is None else environ
    password = env.get(password_env) or None
    verify = target.options.get("verify", "1").lower() not in ("0", "false", "no")
    kwargs: dict[str, Any] = {
        "host": target.host, "port": target.port or (8443 if target.scheme == "https" else 8123),
        "username": target.user or "default", "password": password or "", "database": target.database,
        "secure": target.scheme == "https", "verify": verify, "connect_timeout": connect_timeout,
        "send_receive_timeout": query_timeout, "autogenerate_session_id": False}
    if "ca_cert" in target.options:
        kwargs["ca_cert"] = target.options["ca_cert"]
    if target.settings:
        kwargs["settings"] = dict(target.settings)
    try:
        client = driver.get_client(**kwargs)
    except Exception as exc:
        raise error_for(exc, target, password, "connecting") from None
    return ClickHouseConnection(client, target, password)


def require_driver(target: Target) -> Any:
    """The module that reads ``target``: chDB (with pyarrow) in process, clickhouse-connect over
    HTTP; a missing one is refused naming its extra (``chdb`` or ``clickhouse``)."""
    if target.in_process:
        require("pyarrow", extra="chdb", needed_for="a chdb:// URL (chDB in process)", error=ClickHouseInputError)
        return require("chdb", extra="chdb", needed_for="a chdb:// URL (chDB in process)", error=ClickHouseInputError)
    return require("clickhouse_connect", extra="clickhouse", needed_for="reading from ClickHouse",
                   error=ClickHouseInputError)


def _connect_chdb(chdb: Any, target: Target) -> ClickHouseConnection:
    """A chDB handle on ``target``'s data directory (no password: the engine is this process's)."""
    _existing_data_directory(target.path)
    try:
        handle = chdb.connect(_chdb_connection_string(target))
    except Exception as exc:
        raise error_for(exc, target, None, "connecting") from None
    return ClickHouseConnection(handle, target, None)

"""A loopback ClickHouse HTTP interface answered by chDB, for the real clickhouse-connect client.

It stands in for a ClickHouse server, which cannot run here (Debian's clickhouse-server predates
Map columns; no other build can be installed). It speaks the part of the HTTP interface the
client uses: the query in the body (or ``query=``, or a ``multipart/form-data`` field, as the
client sends it once its parameters are long), ``param_NAME`` values bound server-side by the
engine (never substituted here), ``default_format``, user and password (basic auth or
``X-ClickHouse-User``/``-Key``), errors as ``Code: N. DB::Exception`` bodies with the
``X-ClickHouse-Exception-Code`` header, results streamed in chunks, and the
``X-ClickHouse-Summary`` header (rows and bytes read; ``requests`` also keeps each query's wall and
CPU seconds, for the benchmark). Set ``CLICKHOUSE_URL`` to run the same tests against a real server
instead.

With ``replay=True`` (the benchmark's measure of the client alone) a streamed result is kept as it
was sent, and the same query with the same parameters is answered again from those bytes without
the engine: what a server on its own machine, already holding the answer, costs the reader's cores.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

CHUNK = 64 * 1024
_ARROW_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"
"""An Arrow IPC stream's end marker (a continuation and a zero length)."""
_CODE = re.compile(r"Code: (\d+)")


class ChdbHttpServer:
    """Serve ``session`` (a chdb Session) on 127.0.0.1 (``port``, else a free one) with one user
    and password."""

    def __init__(self, session: Any, user: str, password: str, port: int = 0, *, path: str,
                 replay: bool = False):
        self.session, self.user, self.password = session, user, password
        self.replayed: dict[tuple[str, tuple[tuple[str, str], ...]], list[bytes]] | None = {} if replay else None
        """Each streamed result's chunks as sent, by query and parameters (``replay`` only)."""
        self.path = path
        """The engine's folder: each streamed query gets a handle of its own on it (a query that
        fails mid-stream leaves its handle unusable), like a server's per-query context."""
        self.lock = threading.Lock()  # one query at a time on the session
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                outer.handle(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                outer.handle(self, self.rfile.read(length) if length else b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                       daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def __enter__(self) -> ChdbHttpServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def _authorized(self, handler: BaseHTTPRequestHandler, query: dict[str, str]) -> bool:
        user = handler.headers.get("X-ClickHouse-User") or query.get("user")
        password = handler.headers.get("X-ClickHouse-Key") or query.get("password")
        auth = handler.headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        return user == self.user and (password or "") == self.password

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        url = urlsplit(handler.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        content_type = handler.headers.get("Content-Type") or ""
        if content_type.startswith("multipart/form-data"):  # long parameters travel as form fields
            query.update(_form_fields(content_type, body))
            body = b""
        sql = (query.get("query", "") + "\n" + body.decode()).strip()
        params = {k[len("param_"):]: v for k, v in query.items() if k.startswith("param_")}
        self.requests.append({"sql": sql, "params": params, "query": query})
        if not self._authorized(handler, query):
            name = handler.headers.get("X-ClickHouse-User") or "default"
            self._error(handler, 403, 516, f"Code: 516. DB::Exception: {name}: Authentication failed: password "
                                           "is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)")
            return
        fmt = query.get("default_format", "TabSeparated")
        streamed = _ARROW_STREAM.search(sql)
        if streamed:
            try:
                clause = _settings_clause(query)
            except ValueError as exc:  # as a server answers an unknown setting
                self._error(handler, 400, 115, f"Code: 115. DB::Exception: {exc}. (UNKNOWN_SETTING)")
                return
            self._stream_arrow(handler, sql[:streamed.start()] + clause, params)
            return
        try:
            with self.lock:
                started, cpu = time.perf_counter(), time.process_time()
                result = self.session.query(sql, fmt, params=params or None)
                data = result.bytes() if hasattr(result, "bytes") else bytes(result)
                self.requests[-1].update(_stats(result, time.perf_counter() - started, time.process_time() - cpu))
        except Exception as exc:
            self._engine_error(handler, exc)
            return
        summary = {"read_rows": str(self.requests[-1].get("read_rows", 0)),
                   "read_bytes": str(self.requests[-1].get("read_bytes", 0)),
                   "elapsed_ns": str(int(self.requests[-1].get("seconds", 0) * 1e9))}
        chunks = _Chunked.start(handler, fmt, summary)
        for start in range(0, len(data), CHUNK):
            chunks.write(data[start:start + CHUNK])
            chunks.flush()
        chunks.end()

    def _stream_arrow(self, handler: BaseHTTPRequestHandler, sql: str, params: dict[str, str]) -> None:
        """An ``ArrowStream`` result sent as the engine makes it, as a server does: the engine's own
        ``ArrowStream`` bytes (each block an lz4-compressed record batch, ClickHouse's default for
        the format), one chunk per block, nothing decoded or encoded again here. chDB's streamed
        query writes each block as a whole stream of its own (schema, batch, end), so the schema is
        sent once and the end marker once, at the end (:func:`_arrow_part`). A failure before the
        first block is an error response; one after it ends the body with the error text between
        the tagged markers that ClickHouse 25.11 and later write (what a client then fails to read
        as Arrow)."""
        import chdb

        key = (sql, tuple(sorted(params.items())))
        if self.replayed is not None and key in self.replayed:
            started, cpu = time.perf_counter(), time.process_time()
            chunks = _Chunked.start(handler, "ArrowStream", {"read_rows": "0", "read_bytes": "0"},
                                    exception_tag=secrets.token_hex(8))
            for chunk in self.replayed[key]:
                chunks.write(chunk)
                chunks.flush()
            chunks.end()
            self.requests[-1].update({"seconds": time.perf_counter() - started, "replayed": True,
                                      "cpu_seconds": time.process_time() - cpu})
            return
        with self.lock:
            started, cpu = time.perf_counter(), time.process_time()
            engine = chdb.connect(self.path)
            try:
                result = engine.send_query(sql, "ArrowStream", params=params or None)
                blocks = iter(result)
                first = next(blocks, None)  # the engine's error, if any, comes before the first block
            except Exception as exc:
                engine.close()
                self._engine_error(handler, exc)
                return
            tag = secrets.token_hex(8)
            chunks = _Chunked.start(handler, "ArrowStream", {"read_rows": "0", "read_bytes": "0"}, exception_tag=tag)
            if self.replayed is not None:
                chunks.kept = []
            sent = 0
            try:
                if first is None:  # no rows: a stream of the schema alone, as a server sends it
                    chunks.write(engine.query(sql, "ArrowStream", params=params or None).bytes())
                else:
                    data = first.bytes()
                    schema = _arrow_part(data, None)
                    chunks.write(schema)
                    chunks.write(_arrow_part(data, schema))
                    chunks.flush()
                    sent = 1
                    for block in blocks:
                        chunks.write(_arrow_part(block.bytes(), schema))
                        chunks.flush()
                        sent += 1
                    chunks.write(_ARROW_END)
                chunks.flush()
                if chunks.kept is not None and self.replayed is not None:
                    self.replayed[key] = chunks.kept
            except Exception as exc:  # mid-stream, as a server (25.11 and later) ends the body
                text = str(exc).encode()
                chunks.write(b"__exception__\r\n%s\r\n%s\n%d %s\r\n__exception__\r\n"
                             % (tag.encode(), text, len(text), tag.encode()))
            finally:
                result.close()
                engine.close()
            chunks.end()
            # No rows-read count: a streamed chDB result does not report one.
            self.requests[-1].update({"seconds": time.perf_counter() - started,
                                      "cpu_seconds": time.process_time() - cpu, "batches_sent": sent})

    def _engine_error(self, handler: BaseHTTPRequestHandler, exc: Exception) -> None:
        """The engine's own error text, as the server would send it."""
        text = str(exc)
        match = _CODE.search(text)
        code = int(match.group(1)) if match else 1001
        self._error(handler, 404 if code in (60, 81) else 500, code, text)

    @staticmethod
    def _error(handler: BaseHTTPRequestHandler, status: int, code: int, text: str) -> None:
        data = text.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "text/plain; charset=UTF-8")
        handler.send_header("X-ClickHouse-Exception-Code", str(code))
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


_ARROW_STREAM = re.compile(r"\s+FORMAT\s+ArrowStream\s*$", re.IGNORECASE)
_NOT_SETTINGS = frozenset({"query", "query_id", "session_id", "session_timeout", "session_check", "database",
                           "default_format", "user", "password", "quota_key", "wait_end_of_query", "buffer_size",
                           "compress", "decompress", "client_protocol_version"})
"""URL parameters of the HTTP interface that are not settings; every other one is a setting."""
_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _settings_clause(query: dict[str, str]) -> str:
    """The URL's settings as a ``SETTINGS`` clause, as a server applies them to the query: names
    checked as identifiers, values as quoted string literals (ClickHouse converts them)."""
    pairs = []
    for name, value in query.items():
        if name in _NOT_SETTINGS or name.startswith("param_"):
            continue
        if not _SETTING_NAME.fullmatch(name):
            raise ValueError(f"not a setting name: {name!r}")
        quoted = value.replace("\\", "\\\\").replace("'", "\\'")
        pairs.append(f"{name} = '{quoted}'")
    return f" SETTINGS {', '.join(pairs)}" if pairs else ""


class _Chunked:
    """A writable file over a handler's body that sends what it holds as one HTTP chunk per flush."""

    def __init__(self, handler: BaseHTTPRequestHandler):
        self._handler, self._held = handler, bytearray()
        self.closed = False
        self.kept: list[bytes] | None = None
        """Every chunk sent, when a replaying server keeps them."""

    @classmethod
    def start(cls, handler: BaseHTTPRequestHandler, fmt: str, summary: dict[str, str],
              exception_tag: str | None = None) -> _Chunked:
        """Send a successful response's headers, as a server does, and return its body."""
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("X-ClickHouse-Format", fmt)
        if exception_tag:
            handler.send_header("X-ClickHouse-Exception-Tag", exception_tag)
        handler.send_header("X-ClickHouse-Summary", json.dumps(summary, separators=(",", ":")))
        handler.end_headers()
        return cls(handler)

    def end(self) -> None:
        """Send what is held and the last, empty chunk."""
        self.flush()
        self._handler.wfile.write(b"0\r\n\r\n")

    def write(self, data: Any) -> int:
        self._held += data
        return len(data)

    def flush(self) -> None:
        if self._held:
            if self.kept is not None:
                self.kept.append(bytes(self._held))
            self._handler.wfile.write(f"{len(self._held):x}\r\n".encode() + bytes(self._held) + b"\r\n")
            self._held.clear()

    def close(self) -> None:
        self.closed = True


def _stats(result: Any, seconds: float, cpu_seconds: float) -> dict[str, Any]:
    """What a query cost the engine: its wall and CPU seconds (the whole server process's, one
    query at a time) and the rows and bytes it read from storage, as a server's summary says."""
    rows = getattr(result, "storage_rows_read", None)
    read = getattr(result, "storage_bytes_read", None)
    return {"seconds": seconds, "cpu_seconds": cpu_seconds,
            "read_rows": int(rows()) if callable(rows) else 0, "read_bytes": int(read()) if callable(read) else 0}


def _form_fields(content_type: str, body: bytes) -> dict[str, str]:
    """The fields of a ``multipart/form-data`` body (the query and its ``param_NAME`` values, as
    clickhouse-connect sends them once they are too long for the URL)."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = payload.decode()
    return fields


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def session_for(path: str | None) -> Any:
    import chdb.session

    return chdb.session.Session(path) if path else chdb.session.Session()


def _arrow_part(block: bytes, schema: bytes | None) -> bytes:
    """One block of chDB's streamed ``ArrowStream`` result (a whole Arrow IPC stream: the schema
    message, record batches, the end marker) as its part of one continuous stream: its schema
    message when ``schema`` is None, else its batches (checked to follow the same schema)."""
    if block[:4] != b"\xff\xff\xff\xff" or not block.endswith(_ARROW_END):
        raise ValueError("chDB's ArrowStream block is not a whole Arrow IPC stream")
    head = 8 + int.from_bytes(block[4:8], "little")  # the schema message: no body
    if schema is None:
        return block[:head]
    if block[:head] != schema:
        raise ValueError("chDB's ArrowStream blocks do not share one schema")
    return block[head:-len(_ARROW_END)]

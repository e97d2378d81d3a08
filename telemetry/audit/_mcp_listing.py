"""MCP targets: a server's ``tools/list`` through the real ``mcp`` client, as plain dictionaries.

``--mcp-stdio "COMMAND"`` is split with :func:`shlex.split` and started without a shell (the SDK
spawns the executable with its arguments); ``--mcp-url URL`` speaks Streamable HTTP; a server
object in this process is listed in-process. Every page of the listing is read (up to
:data:`MAX_PAGES`). What the server sends is data: names, descriptions and schemas are only ever
compared and printed, never evaluated.

Besides MCP's annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``) a tool's
``_meta`` may declare what the listing cannot otherwise show, under this toolkit's prefix
(:data:`META_PREFIX`): ``kind``, ``scopes`` (the scopes a credential needs to see it),
``readback`` (true when the server verifies its writes) and ``instrumented``.

A server that exposes this toolkit's tool-plan meta tool (``telemetry.mcp.expose_tool_plan``: its
``_meta`` says ``outcome-telemetry/tool_plan``) is asked for the plan, the one tool the audit ever
calls (a read of the plan, no arguments); each tool's entry is kept beside its listing under
:data:`PLAN_ENTRY`, and only checked values are read from it (which reads answer from a cache,
which read verifies a write).
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Final

from .. import conventions as c
from .._extras import require
from ..exceptions import AuditTargetError
from . import _infer as infer
from ._model import ToolModel

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_PAGES",
    "PLAN_ENTRY",
    "META_INSTRUMENTED",
    "META_KIND",
    "META_PREFIX",
    "META_READBACK",
    "META_SCOPES",
    "from_listing",
    "list_in_process",
    "list_stdio",
    "list_url",
]

MAX_PAGES: Final = 100
DEFAULT_TIMEOUT_SECONDS: Final = 30.0
META_PREFIX: Final = "outcome-telemetry/"
META_KIND: Final = META_PREFIX + "kind"
META_SCOPES: Final = META_PREFIX + "scopes"
META_READBACK: Final = META_PREFIX + "readback"
META_INSTRUMENTED: Final = META_PREFIX + "instrumented"
PLAN_ENTRY: Final = "x-outcome-telemetry-plan"
"""Where a listed tool's entry of the server's tool plan is kept (not an MCP field: the audit's own)."""


def _sdk() -> Any:
    return require("mcp", extra="mcp", needed_for="auditing MCP targets", error=AuditTargetError)


async def _pages(client: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await client.list_tools(cursor=cursor)
        tools.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    planner = next((t.get("name") for t in tools if isinstance(t.get("_meta"), dict)
                    and t["_meta"].get(c.MCP_META_TOOL_PLAN) is True), None)
    if isinstance(planner, str):
        entries = _plan_entries(await client.call_tool(planner, {}))
        for tool in tools:
            entry = entries.get(str(tool.get("name")))
            if entry is not None:
                tool[PLAN_ENTRY] = entry
    return tools


def _plan_entries(result: Any) -> dict[str, dict[str, Any]]:
    """Each tool's entry of a tool-plan result, by name (a malformed plan gives none: it is data)."""
    document = getattr(result, "structured_content", None)
    if getattr(result, "is_error", False) is True or not isinstance(document, dict):
        return {}
    tools = document.get("tools")
    if document.get("schema") != c.PLAN_SCHEMA_ID or not isinstance(tools, list):
        return {}
    return {t["name"]: t for t in tools[:10_000] if isinstance(t, dict) and isinstance(t.get("name"), str)}


def check_timeout(timeout: float, label: str = "") -> None:
    """Refuse a timeout that is not a finite number of seconds above 0 (nan included): a server that
    never answers would be waited on forever. Checked before the SDK is imported, so a bad value is
    refused at once."""
    if not 0 < timeout < math.inf:
        where = f"{label}: " if label else ""
        raise AuditTargetError(f"{where}--timeout must be a finite number of seconds above 0, got {timeout}")


def _list(server: Any, label: str, timeout: float, *, child: bool = False) -> list[dict[str, Any]]:
    """The listing of ``server`` within ``timeout``; ``child``: the SDK starts it as a process."""
    check_timeout(timeout, label)
    mcp = _sdk()
    # anyio comes with the SDK; imported here, not at the top, so the audit's other targets (and
    # its --help) need neither
    anyio = require("anyio", extra="mcp", needed_for="auditing MCP targets", error=AuditTargetError)
    ended_by: list[int] = []

    async def listing() -> list[dict[str, Any]]:
        with anyio.fail_after(timeout):
            async with mcp.Client(server, read_timeout_seconds=timeout) as client:
                return await _pages(client)

    async def run() -> list[dict[str, Any]]:
        if not child or threading.current_thread() is not threading.main_thread():
            return await listing()
        # The SDK starts the server in a session of its own (so a terminal's Ctrl-C reaches only
        # us, and we stop it); SIGTERM or SIGHUP would end this process at once and leave it
        # running. Caught here instead, they cancel the listing, whose exit stops the server.
        found: list[dict[str, Any]] = []
        async with anyio.create_task_group() as group:
            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(*_ENDING_SIGNALS) as received:
                    async for signum in received:
                        ended_by.append(signum)
                        group.cancel_scope.cancel()
                        return

            group.start_soon(stop_on_signal)
            found = await listing()
            group.cancel_scope.cancel()
        return found

    try:
        listed: list[dict[str, Any]] = anyio.run(run)
    except TimeoutError as exc:
        raise AuditTargetError(f"{label}: no tools/list answer within {timeout:g} s; check that it is an MCP server") from exc
    except AuditTargetError:
        raise
    except Exception as exc:  # the SDK raises many kinds (spawn, protocol, HTTP, exception groups)
        raise AuditTargetError(f"{label}: cannot list its tools: {_reason(exc)}") from exc
    finally:
        if ended_by:  # the server is stopped: end as the signal would have ended us
            signal.signal(ended_by[0], signal.SIG_DFL)
            os.kill(os.getpid(), ended_by[0])
    return listed


_REAPER = Path(__file__).with_name("_reaper.py")
"""Started in the server's place: it runs the server and ends it when the audit ends."""
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, "SIGHUP") else (signal.SIGTERM,)


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    if inner:
        return _reason(inner[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def list_stdio(command: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> list[dict[str, Any]]:
    """The tools of the server ``command`` starts (split with shlex, run without a shell)."""
    check_timeout(timeout, f"--mcp-stdio {command!r}")
    mcp = _sdk()
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise AuditTargetError(f"--mcp-stdio {command!r}: cannot split it into a command line: {exc}") from exc
    if not argv:
        raise AuditTargetError("--mcp-stdio needs a command, e.g. --mcp-stdio 'python server.py'")
    label = f"--mcp-stdio {command!r}"
    if shutil.which(argv[0]) is None:
        raise AuditTargetError(f"{label}: cannot start it: {argv[0]!r} is no program (not an executable file, "
                               "nor one on PATH); give the server's command line as you would run it")
    if os.name == "posix":  # the server ends with the audit, SIGKILL included (see _reaper.py)
        params = mcp.StdioServerParameters(command=sys.executable,
                                           args=["-I", "-S", str(_REAPER), str(os.getpid()), "--", *argv])
    else:
        params = mcp.StdioServerParameters(command=argv[0], args=argv[1:])
    return _list(params, label, timeout, child=True)


def list_url(url: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> list[dict[str, Any]]:
    """The tools of the Streamable HTTP server at ``url``."""
    if not url.startswith(("http://", "https://")):
        raise AuditTargetError(f"--mcp-url {url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000/mcp")
    return _list(url, f"--mcp-url {url!r}", timeout)


def list_in_process(server: Any, label: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> list[dict[str, Any]]:
    """The tools of an ``MCPServer`` or low-level ``Server`` object, as a client would list them."""
    return _list(server, label, timeout)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def from_listing(tool: dict[str, Any], target: str) -> ToolModel:
    """A :class:`ToolModel` from one listed tool (a ``tools/list`` entry as JSON)."""
    name = _text(tool.get("name")) or "(unnamed)"
    schema = tool.get("inputSchema")
    schema = schema if isinstance(schema, dict) else {}
    annotations = tool.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    meta = tool.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    model = ToolModel(
        name=name,
        target=target,
        description=_text(tool.get("description")),
        input_schema=schema,
        read_only=_bool(annotations.get(c.MCP_HINTS["read_only"][1])),
        destructive=_bool(annotations.get(c.MCP_HINTS["destructive"][1])),
        idempotent=_bool(annotations.get(c.MCP_HINTS["idempotent"][1])),
        readback=_bool(meta.get(META_READBACK)),
        instrumented=_bool(meta.get(META_INSTRUMENTED)),
    )
    if model.readback is not None:
        model.readback_evidence = f"_meta {META_READBACK} = {str(model.readback).lower()}"
    scopes = meta.get(META_SCOPES)
    if isinstance(scopes, list) and all(isinstance(s, str) for s in scopes):
        model.scopes = tuple(scopes)
    _read_plan(model, tool.get(PLAN_ENTRY), meta)
    kind = meta.get(META_KIND)
    if isinstance(kind, str) and kind in c.KINDS:
        model.declared_kind, model.kind_source = kind, f"_meta {META_KIND}"
    elif model.read_only is True:
        model.declared_kind, model.kind_source = c.KIND_READ, "MCP annotations (readOnlyHint: true)"
    elif model.read_only is False:
        inferred, _why = infer.infer_kind(name, infer.parameters(schema))
        model.declared_kind = inferred if inferred != c.KIND_READ else c.KIND_WRITE
        model.kind_source = "MCP annotations (readOnlyHint: false)" + (
            f", {model.declared_kind} inferred from the name" if model.declared_kind != c.KIND_WRITE else ""
        )
    return model


def _read_plan(model: ToolModel, entry: Any, meta: dict[str, Any]) -> None:
    """What the tool plan (or ``_meta``) says of a tool: a read from a cache, the read that verifies it."""
    model.reads_cache = meta.get(c.MCP_META_READS_CACHE) is True
    if not isinstance(entry, dict):
        return
    model.reads_cache = model.reads_cache or entry.get("reads_cache") is True
    sequence = entry.get("sequence")
    for step in sequence[:16] if isinstance(sequence, list) else ():
        if isinstance(step, dict) and step.get("step") == "verify" and isinstance(step.get("tool"), str):
            model.verify_tool = step["tool"][:128]

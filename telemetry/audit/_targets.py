"""Loading ``module:attribute`` targets into :class:`ToolModel` values, without calling any tool.

The attribute may be a function or bound method, a list/tuple/dict of them, a guards object
(:class:`~telemetry.guards.StateStore`, ``Planner``, ``Delegations``, ``Objectives``,
``IdempotencyKeys``, ``ScopedTools``) or an MCP SDK server object. Importing the module runs its
top-level code, exactly as ``python -c "import module"`` would; nothing else of it runs.

That code is the target's, not the audit's, so it never decides how the audit ends: it sees a
command line of its own (its name alone, not the audit's flags, so its own argparse neither reads
nor rejects them), what it prints goes to stderr (stdout carries the audit's JSON or SARIF), and
a ``sys.exit()`` in it (or its argparse giving up) is an :class:`AuditTargetError` naming the
target, exit 2, whatever the code it exited with: a gate must never pass on an audit not done.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import guards as _guards_package
from ..exceptions import AuditTargetError
from ..guards import (
    SCHEDULE_ATTRIBUTE,
    Delegations,
    IdempotencyKeys,
    Objectives,
    Planner,
    ScheduledSends,
    ScheduleSpec,
    ScopedTools,
    StateStore,
    ToolRegistry,
    reads_cache_of,
)
from ..guards._idempotency import KEY_PARAMETER_ATTRIBUTE
from ..instrument import SPEC_ATTRIBUTE, ToolSpec
from . import _mcp_listing as mcp_listing
from ._model import Source, ToolModel
from ._schema import input_schema

__all__ = ["AGENT_TOOLS", "from_callable", "load", "tools_of"]

AGENT_TOOLS: dict[type, tuple[str, ...]] = {
    StateStore: ("read_state", "write_state"),
    Planner: ("plan_change", "commit_plan"),
    Delegations: ("get_task", "register_task", "delegate"),
    Objectives: ("publish_objective", "get_objective", "supersede_objective"),
    ScheduledSends: ("get_scheduled_send", "cancel_scheduled_send", "approve_scheduled_send"),
}
"""The tools each guards object offers an agent (``force_write_state`` is an operator's tool)."""

_READBACK_IN_BODY = ".set_readback("
_ENVELOPE_IN_BODY = re.compile(r"\b(?:refusal|busy_refusal|envelope_result)\(")
_GUARDS_DIR = str(Path(_guards_package.__file__).parent)
_SELF_CALL = re.compile(r"\bself\.(\w+)\(")


def load(target: str) -> list[ToolModel]:
    """The tools of ``module:attribute`` (the attribute may be dotted: ``app:world.state``)."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise AuditTargetError(
            f"target {target!r} is not module:attribute; e.g. myapp.tools:write_state or examples.server:server"
        )
    with _target_code(target, module_name):
        return _load(target, module_name, attribute)


@contextlib.contextmanager
def _target_code(target: str, module_name: str) -> Iterator[None]:
    """Around everything that may run the target's code (its import, attribute look-ups, an
    in-process MCP listing): see the module docstring."""
    argv = sys.argv
    sys.argv = [module_name]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    except BaseException as exc:
        exit_ = _system_exit(exc)
        if exit_ is None:
            raise
        raise AuditTargetError(_exited(target, module_name, exit_.code)) from None
    finally:
        sys.argv = argv


def _system_exit(exc: BaseException) -> SystemExit | None:
    """``exc`` when it is a SystemExit, or the first one inside an exception group (an in-process
    MCP listing runs the server's code in a task group)."""
    if isinstance(exc, SystemExit):
        return exc
    for inner in getattr(exc, "exceptions", None) or ():
        if isinstance(inner, BaseException) and (found := _system_exit(inner)) is not None:
            return found
    return None


def _exited(target: str, module_name: str, code: object) -> str:
    how = "argparse gave up on its command line, or the code" if code == 2 else "the code"
    return (
        f"target {target!r}: {module_name!r} ended the process while being read (SystemExit({code!r}): {how} "
        "called sys.exit()), so none of its tools was audited; run its program only under "
        "`if __name__ == \"__main__\":`, or point the audit at a module that defines the tools without "
        "running anything"
    )


def _load(target: str, module_name: str, attribute: str) -> list[ToolModel]:
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may raise anything while importing
        raise AuditTargetError(f"target {target!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = sorted(n for n in dir(obj) if not n.startswith("_"))[:20]
            raise AuditTargetError(
                f"target {target!r}: {part!r} is not an attribute of {obj!r}; it has: {', '.join(names) or 'nothing public'}"
            ) from None
    tools = tools_of(obj, target)
    if not tools:
        raise AuditTargetError(f"target {target!r} holds no tools (an empty collection)")
    return tools


def tools_of(obj: Any, target: str) -> list[ToolModel]:
    """The tools in ``obj`` (see the module docstring for what it may be)."""
    server = _mcp_server_tools(obj, target)
    if server is not None:
        return server
    for kind, names in AGENT_TOOLS.items():
        if isinstance(obj, kind):
            tools = [from_callable(getattr(obj, n), target) for n in names]
            if isinstance(obj, StateStore):
                tools[0].notes.append("force_write_state is left out: it is an operator's tool (it needs `operator`)")
            return tools
    if isinstance(obj, ScopedTools):
        return _scoped(obj, target)
    if isinstance(obj, IdempotencyKeys):
        return [
            _noted(from_callable(f, target), "listed by IdempotencyKeys: this is the function it guards, before any decorator above it")
            for f in obj.guarded
        ]
    if isinstance(obj, ToolRegistry):
        raise AuditTargetError(
            f"target {target!r} is a ToolRegistry, which answers per credential: audit registry.scoped(scopes), "
            f"the inventory one credential sees"
        )
    if isinstance(obj, Mapping):
        return [from_callable(_callable(v, target), target, name=str(k)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in tools_of(item, target)]
    if callable(obj) and not isinstance(obj, type):
        return [from_callable(obj, target)]
    raise AuditTargetError(
        f"target {target!r} is a {type(obj).__name__}, not a tool: pass a function, a bound method, a list or dict "
        f"of them, a guards object (StateStore, Planner, Delegations, Objectives, IdempotencyKeys, ScopedTools) "
        f"or an MCP server object"
    )


def _noted(model: ToolModel, note: str) -> ToolModel:
    model.notes.append(note)
    return model


def _callable(value: Any, target: str) -> Callable[..., Any]:
    if not callable(value):
        raise AuditTargetError(f"target {target!r}: {value!r} is not a function")
    return value  # type: ignore[no-any-return]


def _scoped(tools: ScopedTools, target: str) -> list[ToolModel]:
    entries = {e["name"]: e for e in tools.inventory()}
    models = [from_callable(tools.list_tools, target)]
    models[0].scopes = ()  # list_tools is the inventory itself: every credential has it
    for name, func in tools.callables().items():
        model = from_callable(func, target, name=name)
        model.scopes = tuple(entries[name]["required_scopes"])
        models.append(model)
    return models


def _source(func: Any) -> Source | None:
    inner = inspect.unwrap(getattr(func, "__func__", func))
    code = getattr(inner, "__code__", None)
    if code is None:
        return None
    return Source(code.co_filename, code.co_firstlineno)


def _sets_readback_in_body(func: Any) -> bool:
    """The body (or a ``self._helper(...)`` it calls, one level down) calls ``call.set_readback``."""
    owner = getattr(func, "__self__", None)
    try:
        body = inspect.getsource(inspect.unwrap(getattr(func, "__func__", func)))
    except (OSError, TypeError):
        return False
    if _READBACK_IN_BODY in body:
        return True
    for helper in dict.fromkeys(_SELF_CALL.findall(body)) if owner is not None else ():
        method = getattr(type(owner), helper, None)
        try:
            if callable(method) and _READBACK_IN_BODY in inspect.getsource(inspect.unwrap(method)):
                return True
        except (OSError, TypeError):
            continue
    return False


def _error_envelope(func: Any, spec: ToolSpec | None) -> str | None:
    """What declares ``func``'s error results a model can act on, or None (see ``actionable_errors``)."""
    if spec is not None and (spec.outcomes or spec.exceptions):
        declared = sorted(spec.outcomes | frozenset(spec.exceptions.values()))
        return f"declares its outcome codes ({', '.join(declared[:5])}{' ...' if len(declared) > 5 else ''})"
    chain: list[Any] = []
    current = getattr(func, "__func__", func)
    while current is not None and len(chain) < 16:
        chain.append(current)
        current = getattr(current, "__wrapped__", None)
    for link in chain:
        code = getattr(getattr(link, "__func__", link), "__code__", None)
        if code is not None and code.co_filename.startswith(_GUARDS_DIR):
            return ("a guard: its refusals are telemetry.guards.refusal envelopes (a code from the outcome "
                    "vocabulary, retry advice, a message, the context to redo the call)")
    try:
        body = inspect.getsource(chain[-1]) if chain else ""
    except (OSError, TypeError):
        body = ""
    if _ENVELOPE_IN_BODY.search(body):
        return "its body returns refusal envelopes (a code, retry advice, a message)"
    return None


def from_callable(
    func: Callable[..., Any],
    target: str,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
) -> ToolModel:
    """A Python tool: its spec (when instrumented), its schema from the signature, where it lives."""
    spec = getattr(func, SPEC_ATTRIBUTE, None)
    spec = spec if isinstance(spec, ToolSpec) else None
    tool_name = name or (spec.name if spec is not None else getattr(func, "__name__", None)) or repr(func)
    notes: list[str] = []
    if schema is None:
        schema, notes = input_schema(func, tool_name)
    model = ToolModel(
        name=tool_name,
        target=target,
        description=description if description is not None else (inspect.getdoc(func) or ""),
        input_schema=schema,
        instrumented=spec is not None,
        idempotency_key=getattr(func, KEY_PARAMETER_ATTRIBUTE, None),
        review_seconds=schedule.review_seconds if isinstance(schedule := getattr(func, SCHEDULE_ATTRIBUTE, None),
                                                              ScheduleSpec) else None,
        source=_source(func),
        notes=notes,
        error_envelope=_error_envelope(func, spec),
        reads_cache=reads_cache_of(func),
    )
    if spec is not None:
        model.declared_kind, model.kind_source = spec.kind, f"@instrument_tool(kind={spec.kind!r})"
        model.read_only, model.destructive, model.idempotent = spec.read_only, spec.destructive, spec.idempotent
        if spec.readback is not None:
            model.readback, model.readback_evidence = True, "readback= is declared on @instrument_tool"
        elif _sets_readback_in_body(func):
            model.readback, model.readback_evidence = True, "its body sets the read-back (call.set_readback)"
        else:
            model.readback, model.readback_evidence = False, "no readback= on @instrument_tool and none set in its body"
    return model


def _mcp_server_tools(obj: Any, target: str) -> list[ToolModel] | None:
    """An ``MCPServer`` (its registered functions, so our specs are read too) or a low-level ``Server``."""
    import sys

    if "mcp" not in sys.modules:  # a server object implies the SDK is imported already
        return None
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    if isinstance(obj, MCPServer):
        listed = {t.get("name"): t for t in mcp_listing.list_in_process(obj, f"target {target!r}")}
        manager = getattr(obj, "_tool_manager", None)  # the SDK has no public accessor for the functions
        records = {r.name: r for r in manager.list_tools()} if manager is not None else {}
        models = []
        for name, wire in listed.items():
            record = records.get(name)
            wired = mcp_listing.from_listing(wire, target)
            if record is None:
                models.append(wired)
                continue
            model = from_callable(record.fn, target, name=wired.name, description=wired.description, schema=wired.input_schema)
            if model.declared_kind is None:
                model.declared_kind, model.kind_source = wired.declared_kind, wired.kind_source
                model.read_only, model.destructive, model.idempotent = wired.read_only, wired.destructive, wired.idempotent
            if model.readback is None:
                model.readback, model.readback_evidence = wired.readback, wired.readback_evidence
            model.reads_cache = model.reads_cache or wired.reads_cache
            model.verify_tool = wired.verify_tool
            model.scopes = wired.scopes
            models.append(model)
        return models
    if isinstance(obj, Server):
        return [mcp_listing.from_listing(t, target) for t in mcp_listing.list_in_process(obj, f"target {target!r}")]
    return None

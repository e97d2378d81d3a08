"""Instrument the tools of an ``MCPServer``: one decorator for new tools, one call for existing ones.

Decorator order matters because ``MCPServer.tool()`` registers the function it is given and
returns it unchanged. Stacked the right way round, the server registers the instrumented
wrapper::

    @server.tool()              # outermost: registers what is below it
    @instrument_tool(kind="read")
    def get_state(key: str) -> dict[str, Any]: ...

The other way round the server registers the bare function and the wrapper is never called by
MCP. :func:`tool` avoids the question (it does both, in order), and :func:`instrument_server`
finds that mistake in tools already registered, warns, and puts the wrapper in place.

:func:`instrument_server` (and :func:`tool`) also run each call with the caller's identity from
the request's ``_meta`` (``outcome-telemetry/tool_call_id``, ``/agent_id``, ``/conversation_id``,
which :func:`telemetry.mcp.trace_meta` writes), record arguments the SDK's validation refuses as
``invalid_argument``, and :func:`uninstrument_server` puts every tool back as it was.

Our ``execute_tool`` span is started in the current context, so under the SDK's
``OpenTelemetryMiddleware`` it nests as an INTERNAL child of the ``tools/call {name}`` SERVER
span: the SDK's span keeps the protocol (request id, argument validation, result serialization),
ours the tool's triad. Only ours counts in the metrics, and a tool is never instrumented twice.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from mcp.server.mcpserver import MCPServer
from mcp_types import Icon, ToolAnnotations
from pydantic import ValidationError

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import SPEC_ATTRIBUTE, ToolOptions, ToolSpec, framework_context, instrument_with
from ..integrations._plumbing import passed_through, record_refused, replace_attribute, restore_attributes, was_replaced
from ._hints import annotations_for, check_consistent, merge_hints

_HINT_OPTIONS = ("kind", "read_only", "destructive", "idempotent")

F = TypeVar("F", bound=Callable[..., Any])



def _require_server(server: Any, helper: str) -> MCPServer:
    if isinstance(server, MCPServer):
        return server
    hint = " (call it with the server first: @telemetry.mcp.tool(server, ...))" if callable(server) else ""
    raise ConfigurationError(f"{helper} needs an mcp.server.mcpserver.MCPServer, got {server!r}{hint}")


def tool(
    server: MCPServer,
    *,
    title: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    icons: list[Icon] | None = None,
    meta: dict[str, Any] | None = None,
    structured_output: bool | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Register a function as a tool of ``server`` and instrument it, in the right order.

    The telemetry options (``name``, ``kind``, the hints, ``readback`` ...) are
    :func:`telemetry.instrument_tool`'s (:class:`~telemetry.instrument._spec.ToolOptions`); the MCP options are
    ``MCPServer.tool()``'s. The hints (``read_only``, ``destructive``, ``idempotent``, or
    ``kind``'s defaults) become the tool's annotations in ``tools/list``; hints already in
    ``annotations`` count as given and a contradiction raises :class:`ConfigurationError`.
    Returns the instrumented function, so direct calls are recorded too. Example::

        @telemetry.mcp.tool(server, kind="write", title="Write a state value")
        def write_state(key: str, value: str, expected_version: str) -> dict[str, Any]: ...
    """
    mcp_server = _require_server(server, "telemetry.mcp.tool")
    declared = ToolOptions.from_mapping(options, where="telemetry.mcp.tool")

    def decorate(fn: F) -> F:
        if hasattr(fn, SPEC_ATTRIBUTE):
            raise ConfigurationError(
                f"{getattr(fn, '__name__', fn)!r} is already instrumented; telemetry.mcp.tool instruments it "
                f"itself, so drop @instrument_tool (pass its options to telemetry.mcp.tool instead)"
            )
        if not callable(fn):
            raise ConfigurationError(f"telemetry.mcp.tool decorates functions, got {fn!r}")
        tool_name = declared.name if declared.name is not None else getattr(fn, "__name__", None)
        if not isinstance(tool_name, str) or not tool_name or tool_name == "<lambda>":
            raise ConfigurationError(f"telemetry.mcp.tool needs a tool name for {fn!r}; pass name=")
        hints = merge_hints(tool_name, declared, annotations)
        wrapper = instrument_with(fn, declared.replace(name=tool_name, **hints))
        spec: ToolSpec = getattr(wrapper, SPEC_ATTRIBUTE)
        mcp_server.add_tool(
            wrapper,
            name=tool_name,
            title=title,
            description=description,
            annotations=annotations_for(spec, annotations),
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )
        record = _record_named(mcp_server, tool_name)
        if record is not None:
            _with_request_context(record)
        return cast(F, wrapper)

    return decorate


def _registered_tools(server: MCPServer) -> list[Any]:
    """The server's ``Tool`` records (the SDK keeps them in its tool manager; no public accessor)."""
    manager = getattr(server, "_tool_manager", None)
    list_tools = getattr(manager, "list_tools", None)
    if list_tools is None:
        raise ConfigurationError(
            "this version of the mcp SDK keeps no tool manager on MCPServer, so instrument_server cannot "
            "reach its tools; register them with telemetry.mcp.tool(server, ...) instead"
        )
    return list(list_tools())


def _record_named(server: MCPServer, name: str) -> Any:
    for record in _registered_tools(server):
        if record.name == name:
            return record
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _caller(context: Any) -> tuple[str | None, str | None, str | None]:
    """(agent, conversation, tool call id) from the ``tools/call`` request's ``_meta``."""
    try:
        meta = context.request_context.meta
    except Exception:  # a call without a request (a test calling record.run directly)
        return None, None, None
    if not isinstance(meta, Mapping):
        return None, None, None
    return (_text(meta.get(c.MCP_META_AGENT_ID)), _text(meta.get(c.MCP_META_CONVERSATION_ID)),
            _text(meta.get(c.MCP_META_TOOL_CALL_ID)))


def _with_request_context(record: Any) -> None:
    """Run the tool record with the caller's identity; record arguments its validation refuses.

    ``Tool.run`` validates the arguments, then calls the function: the wrapper opens
    :func:`telemetry.instrument.framework_context` around both, and a ``ToolError`` caused by a
    ``ValidationError`` that never reached the function is a refused call (``invalid_argument``).
    """
    if was_replaced(record, "run"):
        return
    run = record.run

    async def run_with_context(arguments: dict[str, Any], context: Any, *args: Any, **kwargs: Any) -> Any:
        with framework_context(*_caller(context)):
            try:
                return await run(arguments, context, *args, **kwargs)
            except Exception as exc:
                spec = getattr(record.fn, SPEC_ATTRIBUTE, None)
                if (isinstance(spec, ToolSpec) and isinstance(exc.__cause__, ValidationError)
                        and not passed_through(exc.__cause__, record.fn)):
                    record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
                raise

    replace_attribute(record, "run", run_with_context)


def _stray_wrapper(fn: Any) -> Callable[..., Any] | None:
    """The instrumented wrapper of ``fn`` that its own module binds ``fn``'s name to, if any.

    That is the mark of the wrong decorator order: ``@instrument_tool`` above ``@server.tool()``
    registers the bare function while the module's name for it holds the wrapper. Found by
    walking ``__module__``/``__qualname__`` (module-level functions and class attributes);
    functions defined inside other functions cannot be looked up this way.
    """
    func = getattr(fn, "__func__", fn)
    module = sys.modules.get(getattr(func, "__module__", None) or "")
    qualname = getattr(func, "__qualname__", "")
    if module is None or not qualname or "<locals>" in qualname:
        return None
    target: Any = module
    for part in qualname.split("."):
        target = inspect.getattr_static(target, part, None)
        if target is None:
            return None
    target = getattr(target, "__func__", target)  # staticmethod/classmethod objects
    if isinstance(getattr(target, SPEC_ATTRIBUTE, None), ToolSpec) and getattr(target, "__wrapped__", None) is func:
        if func is not fn:  # a bound method was registered: bind the wrapper the same way
            bound: Callable[..., Any] = target.__get__(fn.__self__)
            return bound
        return cast(Callable[..., Any], target)
    return None


def _instrument_bare(record: Any, options: Mapping[str, Any]) -> Callable[..., Any]:
    declared = ToolOptions.from_mapping(options, where=f"instrument_server (tool {record.name!r})")
    if declared.name is not None and declared.name != record.name:
        raise ConfigurationError(
            f"instrument_server: tool {record.name!r} cannot be renamed to {declared.name!r}; clients call it "
            f"by its MCP name, so drop name= from its options"
        )
    hints = merge_hints(record.name, declared, record.annotations)
    wrapper: Callable[..., Any] = instrument_with(record.fn, declared.replace(name=record.name, **hints))
    return wrapper


def instrument_server(server: MCPServer, options: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """Instrument every tool registered on ``server``; returns the names of the tools it wrapped.

    ``options`` maps a tool name to :func:`telemetry.instrument_tool` options for it (``kind``,
    hints, ``readback``, ``outcome``, ``outcomes``, ``record_arguments``). Hints missing there
    are read from the tool's MCP annotations. A tool's annotations in ``tools/list`` change only
    when the user stated hints: a ``kind`` or hint in ``options``, or ``@instrument_tool``
    stacked under ``@server.tool()``; those decided hints are written into them, so ``tools/list``
    and the spans agree. Input and output schemas are untouched.

    Tools already stacked under ``@instrument_tool`` are kept (never wrapped twice); their
    annotations are checked against their hints. A tool registered *before* it was instrumented
    (``@instrument_tool`` above ``@server.tool()``) gets its wrapper put in place, with a warning
    saying to swap the decorators. Calling this twice is harmless. When any tool is refused (a
    name that does not match, contradicting hints, options for a tool already instrumented), the
    ConfigurationError leaves every tool as it was before the call: never half instrumented.
    """
    mcp_server = _require_server(server, "telemetry.mcp.instrument_server")
    options = dict(options or {})
    records = _registered_tools(mcp_server)
    missing = sorted(set(options) - {r.name for r in records})
    if missing:
        raise ConfigurationError(
            f"instrument_server: options name tools {missing} that the server does not have; "
            f"its tools are {sorted(r.name for r in records)}"
        )
    kept = [(record, _own_state(record)) for record in records]
    try:
        return _instrument_records(records, options)
    except BaseException:  # one tool refused: none is left instrumented by this call
        for record, state in kept:
            _put_back(record, state)
        raise


def _own_state(record: Any) -> dict[str, Any]:
    """What ``record`` holds itself, the originals :func:`replace_attribute` keeps copied too."""
    state = dict(vars(record))
    for name, value in state.items():
        if isinstance(value, dict) and name.startswith("__outcome_telemetry"):
            state[name] = dict(value)
    return state


def _put_back(record: Any, state: dict[str, Any]) -> None:
    own = vars(record)
    for name in [n for n in own if n not in state]:
        del own[name]
    for name, value in state.items():
        object.__setattr__(record, name, value)


def _instrument_records(records: list[Any], options: dict[str, Mapping[str, Any]]) -> list[str]:
    """:func:`instrument_server`'s work over ``records``; raises on the first tool it refuses."""
    wrapped: list[str] = []
    for record in records:
        spec: ToolSpec | None = getattr(record.fn, SPEC_ATTRIBUTE, None)
        stray = _stray_wrapper(record.fn) if spec is None else None
        if stray is not None:
            warnings.warn(
                f"MCP tool {record.name!r} was registered before it was instrumented (@instrument_tool is "
                f"above @server.tool()), so the server called the bare function; instrument_server put the "
                f"instrumented one in place. Swap the two decorators (@server.tool() outermost) or use "
                f"telemetry.mcp.tool(server, ...).",
                stacklevel=3,
            )
            if record.name in options:
                raise ConfigurationError(
                    f"instrument_server: tool {record.name!r} is already instrumented by @instrument_tool "
                    f"(above @server.tool()); swap the decorators and give its options there"
                )
            replace_attribute(record, "fn", stray)
            spec = getattr(stray, SPEC_ATTRIBUTE)
            publish = True
        elif spec is None:
            replace_attribute(record, "fn", _instrument_bare(record, options.get(record.name, {})))
            spec = getattr(record.fn, SPEC_ATTRIBUTE)
            wrapped.append(record.name)
            # What clients see changes only for hints the user gave here; else they stay as registered.
            publish = any(options.get(record.name, {}).get(o) is not None for o in _HINT_OPTIONS)
        elif record.name in options:
            raise ConfigurationError(
                f"instrument_server: tool {record.name!r} is already instrumented by @instrument_tool; "
                f"give its options there instead of in instrument_server(options=...)"
            )
        else:
            publish = True  # stacked under @instrument_tool: its hints are the user's, published
        assert spec is not None
        if spec.name != record.name:
            raise ConfigurationError(
                f"MCP tool {record.name!r} is instrumented as {spec.name!r}, so its spans and metrics would not "
                f"match the name clients call; pass name={record.name!r} to instrument_tool"
            )
        check_consistent(record.name, spec, record.annotations)
        if publish:
            annotations = annotations_for(spec, record.annotations)
            if annotations != record.annotations:
                replace_attribute(record, "annotations", annotations)
        _with_request_context(record)
    return wrapped


def uninstrument_server(server: MCPServer) -> list[str]:
    """Undo :func:`instrument_server`: each tool's function, annotations and invocation as registered.

    Tools registered with :func:`tool` or stacked under ``@instrument_tool`` keep their own
    instrumentation (it is part of their definition); what ``instrument_server`` changed goes.
    Returns the names of the tools it put back.
    """
    mcp_server = _require_server(server, "telemetry.mcp.uninstrument_server")
    return [record.name for record in _registered_tools(mcp_server) if restore_attributes(record)]

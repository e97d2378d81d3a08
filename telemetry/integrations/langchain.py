"""LangChain: ``instrument(tools)`` records every tool of a list, a LangGraph ``ToolNode`` or agent.

Install with ``pip install -e '/path/to/outcome-telemetry[langchain]'`` (``langchain-core``; LangGraph is
optional). Example::

    from langgraph.prebuilt import create_react_agent
    from telemetry.integrations import langchain as otel_langchain

    tools = [StructuredTool.from_function(store.read_state), ...]
    agent = create_react_agent(model, tools, name="planner")
    otel_langchain.instrument(agent)   # the graph: its tools, and its name as the agent's

What it does, per tool (a ``BaseTool``: ``@tool`` functions, ``StructuredTool``, ``Tool`` or a
subclass with its own ``_run``/``_arun``):

- the function behind the tool (``func``/``coroutine``, else ``_run``/``_arun``) is instrumented
  with :func:`telemetry.instrument.instrument_with`, unless it already is; the tool object, its
  name, description and ``args_schema`` stay the same, so ``bind_tools`` shows the model
  exactly what it showed before;
- each call runs with the framework's context: ``gen_ai.tool.call.id`` is the ``ToolCall`` id,
  ``gen_ai.conversation.id`` LangGraph's ``thread_id`` (``config={"configurable":
  {"thread_id": ...}}``), ``gen_ai.agent.id`` the agent's name (``lc_agent_name`` in the run's
  metadata, or the name of the agent given to :func:`instrument`), unless the user set them with
  ``telemetry.agent()``/``telemetry.tool_call_id()``. Without a thread id LangChain has no id
  for the whole run: set one, or wrap the run in ``telemetry.agent(name, conversation_id=...)``;
- ``ToolException`` (the tool reporting a failure to the model) is transport ``ok`` with outcome
  ``tool_error``, and still propagates to LangChain (which turns it into a message when the
  tool's ``handle_tool_error`` says so);
- arguments that fail the tool's ``args_schema`` never reach the tool: the call is recorded as
  transport ``ok``, outcome ``invalid_argument`` (LangChain then raises or answers as it did);
- our span nests under the tool span of an OpenTelemetry-emitting LangChain tracer found among
  the run's callbacks (OpenInference's ``LangChainInstrumentor``: any handler with
  ``get_span(run_id)``). LangSmith's OpenTelemetry mode writes its spans after the run, in a
  background thread, with ids unknown while the tool runs: ours are not nested there.

A tool instrumented on its own and later given to ``create_react_agent(name=...)`` learns the
agent's name when the graph is instrumented too (``instrument(agent)``, either order); a run's
``lc_agent_name`` metadata (LangChain's ``create_agent``) names it without that. A tool that runs
another agent gives the inner agent's calls their own agent and call ids. :func:`uninstrument`
puts every tool back.

MCP-style hints (``readOnlyHint`` ...) are read from a tool's ``metadata``, where
``langchain-mcp-adapters`` puts a server's tool annotations; ``kinds=`` says it explicitly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from .._extras import require

require("langchain_core", extra="langchain", needed_for="telemetry.integrations.langchain")

from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool, StructuredTool, Tool, ToolException
from opentelemetry import context as otel_context
from opentelemetry import trace
from pydantic import ValidationError
from pydantic.v1 import ValidationError as ValidationErrorV1
from typing_extensions import Unpack

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ._common import Choices, Selection, hints_from
from ._plumbing import record_refused, replace_attribute, restore_attributes, spec_of, was_replaced

__all__ = ["DEFAULT_EXCEPTIONS", "instrument", "uninstrument"]

T = TypeVar("T")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {ToolException: c.OUTCOME_TOOL_ERROR}
"""LangChain's exception for a tool's failure that the model should be told about."""

_AGENT = "__outcome_telemetry_agent__"  # on each tool: the agent name instrument() was told
_DEFAULT_GRAPH_NAME = "LangGraph"
_REFUSED = (ValidationError, ValidationErrorV1)


def _tools_of(target: Any) -> tuple[list[BaseTool], str | None]:
    """The tools of a tool, a list of tools, a ToolNode, or a compiled graph holding ToolNodes."""
    if isinstance(target, BaseTool):
        return [target], None
    by_name = getattr(target, "tools_by_name", None)
    if isinstance(by_name, Mapping):
        return list(by_name.values()), None
    nodes = getattr(target, "nodes", None)
    if isinstance(nodes, Mapping):
        found: list[BaseTool] = []
        for node in nodes.values():
            inner = getattr(getattr(node, "bound", None), "tools_by_name", None)
            if isinstance(inner, Mapping):
                found.extend(inner.values())
        name = getattr(target, "name", None)
        return found, name if isinstance(name, str) and name != _DEFAULT_GRAPH_NAME else None
    tools = getattr(target, "tools", target)  # an agent executor holds .tools
    if isinstance(tools, Iterable) and not isinstance(tools, (str, bytes, Mapping)):
        items = list(tools)
        bad = [t for t in items if not isinstance(t, BaseTool)]
        if not bad:
            return items, None
        raise ConfigurationError(
            f"telemetry.integrations.langchain.instrument takes LangChain BaseTools; {bad[0]!r} is not one "
            f"(make it one with langchain_core.tools.tool or StructuredTool.from_function)"
        )
    raise ConfigurationError(
        f"telemetry.integrations.langchain.instrument needs a BaseTool, a list of them, a ToolNode or an "
        f"agent graph, got {target!r}"
    )


def _context_of(config: Any, agent_name: str | None) -> tuple[str | None, str | None]:
    """(agent name, conversation id) from a run's ``RunnableConfig``."""
    if not isinstance(config, Mapping):
        return agent_name, None
    metadata = config.get("metadata") or {}
    configurable = config.get("configurable") or {}
    name = metadata.get("lc_agent_name") if isinstance(metadata, Mapping) else None
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    if thread is None and isinstance(metadata, Mapping):
        thread = metadata.get("thread_id")
    return (name if isinstance(name, str) else agent_name), (str(thread) if thread is not None else None)


def _tracer_span() -> Any:
    """The span a callback tracer opened for the running tool (OpenInference's), or None.

    Inside the tool, LangChain's current config holds the tool run's child callback manager:
    its ``parent_run_id`` is the tool's run, and a tracer that emits OpenTelemetry spans keeps
    the span of that run (``get_span(run_id)``).
    """
    config = var_child_runnable_config.get()
    manager = config.get("callbacks") if isinstance(config, Mapping) else None
    run_id = getattr(manager, "parent_run_id", None)
    if run_id is None:
        return None
    for handler in getattr(manager, "handlers", ()):
        get_span = getattr(handler, "get_span", None)
        if callable(get_span):
            try:
                span = get_span(run_id)
            except Exception:  # another tracer's lookup: no parent rather than a failed tool
                continue
            if isinstance(span, trace.Span) and span.get_span_context().is_valid:
                return span
    return None


def _under_tracer_span() -> AbstractContextManager[Any]:
    span = _tracer_span()
    if span is None or trace.get_current_span() is span:
        return nullcontext()
    return _Attached(trace.set_span_in_context(span))


class _Attached:
    def __init__(self, ctx: Any) -> None:
        self._ctx: Any = ctx
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._ctx)

    def __exit__(self, *exc: Any) -> None:
        otel_context.detach(self._token)


def _with_context(tool: BaseTool) -> None:
    """Make ``tool.run``/``arun`` (which ``invoke`` calls with the call id) set the context, and
    ``_run``/``_arun`` (called inside the tool's run, after the tracers' ``on_tool_start``) open
    our span under a tracer's tool span."""
    if was_replaced(tool, "run"):
        return
    run, arun, _run, _arun = tool.run, tool.arun, tool._run, tool._arun

    def context(kwargs: Mapping[str, Any]) -> AbstractContextManager[None]:
        name, conversation = _context_of(kwargs.get("config"), vars(tool).get(_AGENT))
        return framework_context(name, conversation, kwargs.get("tool_call_id"))

    @functools.wraps(run)
    def run_with_context(*args: Any, **kwargs: Any) -> Any:
        with context(kwargs):
            return run(*args, **kwargs)

    @functools.wraps(arun)
    async def arun_with_context(*args: Any, **kwargs: Any) -> Any:
        with context(kwargs):
            return await arun(*args, **kwargs)

    @functools.wraps(_run)
    def run_nested(*args: Any, **kwargs: Any) -> Any:
        with _under_tracer_span():
            return _run(*args, **kwargs)

    @functools.wraps(_arun)
    async def arun_nested(*args: Any, **kwargs: Any) -> Any:
        with _under_tracer_span():
            return await _arun(*args, **kwargs)

    # Instance attributes, set past pydantic's field handling: the class and its fields stay as they were.
    replace_attribute(tool, "run", run_with_context)
    replace_attribute(tool, "arun", arun_with_context)
    replace_attribute(tool, "_run", run_nested)
    replace_attribute(tool, "_arun", arun_nested)


def _spec(tool: BaseTool) -> Any:
    for attribute in ("func", "coroutine", "_run", "_arun"):
        found = spec_of(vars(tool).get(attribute))
        if found is not None:
            return found
    if isinstance(tool, (StructuredTool, Tool)):
        return spec_of(tool.func) or spec_of(tool.coroutine)
    return None


def _record_refused_input(tool: BaseTool) -> None:
    """Arguments LangChain's validation refuses (``_parse_input``) are a call the tool never saw."""
    if was_replaced(tool, "_parse_input"):
        return
    parse = tool._parse_input

    @functools.wraps(parse)
    def parse_input(*args: Any, **kwargs: Any) -> Any:
        try:
            return parse(*args, **kwargs)
        except _REFUSED as exc:
            spec = _spec(tool)
            if spec is not None:
                record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
            raise

    replace_attribute(tool, "_parse_input", parse_input)


def _instrument_tool(tool: BaseTool, selection: Selection, agent_name: str | None) -> None:
    name = tool.name
    hints = hints_from(tool.metadata) if isinstance(tool.metadata, Mapping) else {}
    if was_replaced(tool, "run"):  # instrumented before; a named agent may name it now
        for attribute in ("func", "coroutine", "_run", "_arun"):
            if spec_of(vars(tool).get(attribute)) is not None:
                selection.seen.add(name)
        if agent_name is not None:
            object.__setattr__(tool, _AGENT, agent_name)
        return
    if isinstance(tool, (StructuredTool, Tool)):
        if tool.func is not None:
            replace_attribute(tool, "func", selection.instrument(name, tool.func, hints))
        if tool.coroutine is not None:
            replace_attribute(tool, "coroutine", selection.instrument(name, tool.coroutine, hints))
    else:
        cls = type(tool)
        replace_attribute(tool, "_run", selection.instrument(name, tool._run, hints))
        if cls._arun is not BaseTool._arun:  # the default _arun runs _run in a thread: one span, not two
            replace_attribute(tool, "_arun", selection.instrument(name, tool._arun, hints))
    replace_attribute(tool, _AGENT, agent_name)
    _with_context(tool)
    _record_refused_input(tool)


def instrument(
    tools: T,
    *,
    agent_name: str | None = None,
    **choices: Unpack[Choices],
) -> T:
    """Instrument LangChain tools in place and return what was given.

    ``tools`` is a ``BaseTool``, a list of them, a LangGraph ``ToolNode``, an agent graph built
    with ``create_react_agent``/``create_agent`` (its tool nodes' tools), or an agent executor.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default: the tool's
            MCP-style hints in its ``metadata``, else ``write``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code, on top of :data:`DEFAULT_EXCEPTIONS`.
        agent_name: ``gen_ai.agent.id`` when the run does not name the agent (default: the
            graph's name, when a named graph is given).

    Safe to call again: nothing is instrumented twice, and a named graph given later names the
    tools instrumented before it.
    """
    found, graph_name = _tools_of(tools)
    selection = Selection("langchain.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    for tool in found:
        _instrument_tool(tool, selection, agent_name or graph_name)
    selection.check_all_named(t.name for t in found)
    return tools


def uninstrument(tools: T) -> T:
    """Undo :func:`instrument` on the same target: every tool as it was. Returns ``tools``."""
    found, _graph_name = _tools_of(tools)
    for tool in found:
        restore_attributes(tool)
    return tools

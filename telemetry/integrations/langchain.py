"""LangChain: ``instrument(tools)`` records every tool of a list, a LangGraph ``ToolNode`` or agent.

Install with ``pip install -e '/path/to/outcome-telemetry[langchain]'`` (``langchain-core``; LangGraph is
optional). Example::

    from langgraph.prebuilt import create_react_agent
    from telemetry.integrations import langchain as otel_langchain

    tools = otel_langchain.instrument([StructuredTool.from_function(store.read_state), ...])
    agent = create_react_agent(model, tools, name="planner")   # or instrument(agent) afterwards

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
  tool's ``handle_tool_error`` says so).

MCP-style hints (``readOnlyHint`` ...) are read from a tool's ``metadata``, where
``langchain-mcp-adapters`` puts a server's tool annotations; ``kinds=`` says it explicitly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from typing_extensions import Unpack

from langchain_core.tools import BaseTool, StructuredTool, Tool, ToolException

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ._common import Choices, Selection, hints_from

__all__ = ["DEFAULT_EXCEPTIONS", "instrument"]

T = TypeVar("T")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {ToolException: c.OUTCOME_TOOL_ERROR}
"""LangChain's exception for a tool's failure that the model should be told about."""

_CONTEXT_MARK = "__outcome_telemetry_context__"
_DEFAULT_GRAPH_NAME = "LangGraph"


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


def _with_context(tool: BaseTool, agent_name: str | None) -> None:
    """Make ``tool.run``/``tool.arun`` (what ``invoke`` calls with the call id) set the context."""
    if getattr(tool, _CONTEXT_MARK, False):
        return
    run, arun = tool.run, tool.arun

    @functools.wraps(run)
    def run_with_context(*args: Any, **kwargs: Any) -> Any:
        name, conversation = _context_of(kwargs.get("config"), agent_name)
        with framework_context(name, conversation, kwargs.get("tool_call_id")):
            return run(*args, **kwargs)

    @functools.wraps(arun)
    async def arun_with_context(*args: Any, **kwargs: Any) -> Any:
        name, conversation = _context_of(kwargs.get("config"), agent_name)
        with framework_context(name, conversation, kwargs.get("tool_call_id")):
            return await arun(*args, **kwargs)

    # Instance attributes, set past pydantic's field handling: the class and its fields stay as they were.
    object.__setattr__(tool, "run", run_with_context)
    object.__setattr__(tool, "arun", arun_with_context)
    object.__setattr__(tool, _CONTEXT_MARK, True)


def _instrument_tool(tool: BaseTool, selection: Selection, agent_name: str | None) -> None:
    name = tool.name
    hints = hints_from(tool.metadata) if isinstance(tool.metadata, Mapping) else {}
    if isinstance(tool, (StructuredTool, Tool)):
        if tool.func is not None:
            tool.func = selection.instrument(name, tool.func, hints)
        if tool.coroutine is not None:
            tool.coroutine = selection.instrument(name, tool.coroutine, hints)
    else:
        cls = type(tool)
        object.__setattr__(tool, "_run", selection.instrument(name, tool._run, hints))
        if cls._arun is not BaseTool._arun:  # the default _arun runs _run in a thread: one span, not two
            object.__setattr__(tool, "_arun", selection.instrument(name, tool._arun, hints))
    _with_context(tool, agent_name)


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

    Safe to call again: nothing is instrumented twice.
    """
    found, graph_name = _tools_of(tools)
    selection = Selection("langchain.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    for tool in found:
        _instrument_tool(tool, selection, agent_name or graph_name)
    selection.check_all_named(t.name for t in found)
    return tools

"""CrewAI: record every tool call of a crew, an agent or a list of tools, in place.

``instrument(crew)`` wraps each tool's function with the same recording as
``@instrument_tool`` (through :func:`telemetry.instrument.instrument_with`, options as
:class:`telemetry.instrument.ToolOptions`), so a ``ToolFailure`` a tool returns is an outcome on
its span and in ``tool_calls_total`` (the built-in classifier recognises the class), not the
"Completed" CrewAI used to log. CrewAI does not hand a tool its ids, so they are read, when
the tool runs, from CrewAI's event scope (the context the framework keeps for its own events):

- ``gen_ai.tool.call.id``: the id of CrewAI's ``tool_usage_started`` event for this call (the
  ``started_event_id`` of its ``ToolUsageFinishedEvent``), so spans join CrewAI's event log;
- ``gen_ai.conversation.id``: the id of the ``crew_kickoff_started`` event, one per kickoff
  (of the outermost ``flow_started`` when the crew runs in a flow, of
  ``lite_agent_execution_started`` for ``Agent.kickoff``);
- ``gen_ai.agent.id``: the agent's ``role``, for tools reached through a crew or an agent.

An id CrewAI does not expose (another version, a tool called outside a run) is simply absent;
telemetry never raises into the crew. A tool object shared by two agents is attributed to the
first one it was instrumented for; give each agent its own instance to tell them apart.

    crew = Crew(agents=[researcher, writer], tasks=[...])
    telemetry.integrations.crewai.instrument(crew, tools={"send_slack": {"kind": "send"}})

Install with ``pip install 'outcome-telemetry[crewai]'``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from typing import Any, TypeVar

from ..exceptions import ConfigurationError
from ..instrument import SPEC_ATTRIBUTE, ToolOptions, agent, current_agent, instrument_with, tool_call_id
from ..runtime import containment as _safe

try:
    from crewai.events import event_context as _crewai_events
    from crewai.tools.base_tool import BaseTool, Tool
    from crewai.utilities.string_utils import sanitize_tool_name
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "telemetry.integrations.crewai needs CrewAI: pip install 'outcome-telemetry[crewai]'"
    ) from exc

T = TypeVar("T")

_CALL_SCOPE = "tool_usage_started"
_RUN_SCOPES = ("crew_kickoff_started", "flow_started", "lite_agent_execution_started")
_WHERE = "telemetry.integrations.crewai.instrument"


def instrument(target: T, *, tools: Mapping[str, ToolOptions | Mapping[str, Any]] | None = None, **defaults: Any) -> T:
    """Instrument every tool of ``target`` (a ``Crew``, an ``Agent``, or an iterable of tools).

    ``defaults`` are ``instrument_tool`` options for every tool (``kind="read"``...); ``tools``
    maps a tool's name (as CrewAI shows it or as the model calls it) to options of its own,
    a mapping laid over the defaults or a whole :class:`ToolOptions`. Call it before
    ``kickoff()``. Returns ``target``, changed in place; a tool already instrumented is left as
    is, so calling it twice is harmless. A name in ``tools`` that matches no tool is a
    :class:`ConfigurationError`, as is an unknown option.
    """
    base = ToolOptions.from_mapping(defaults, where=_WHERE)
    per_tool = {name: _options(name, given, base) for name, given in (tools or {}).items()}
    used: set[str] = set()
    for tool, agent_id in _tools_of(target):
        names = (tool.name, sanitize_tool_name(tool.name))
        key = next((n for n in names if n in per_tool), None)
        if key is not None:
            used.add(key)
        _instrument_tool(tool, per_tool[key] if key is not None else base, agent_id)
    unused = sorted(set(per_tool) - used)
    if unused:
        raise ConfigurationError(f"{_WHERE}: tools={unused!r} name no tool of {target!r}; check the names")
    return target


def _options(name: str, given: ToolOptions | Mapping[str, Any], base: ToolOptions) -> ToolOptions:
    if isinstance(given, ToolOptions):
        return given
    if isinstance(given, Mapping):
        ToolOptions.from_mapping(given, where=f"{_WHERE}(tools={name!r})")  # names checked
        return base.replace(**given)
    raise ConfigurationError(f"{_WHERE}: tools[{name!r}] must be a mapping of options or a ToolOptions, got {given!r}")


def _tools_of(target: Any) -> Iterator[tuple[Any, str | None]]:
    """(tool, the role of the agent that owns it, or None) for each tool reachable from target."""
    if isinstance(target, BaseTool):
        yield target, None
    elif hasattr(target, "agents") and hasattr(target, "tasks"):  # a Crew
        for member in target.agents or ():
            yield from _tools_of(member)
        for task in target.tasks or ():
            owner = getattr(task, "agent", None)
            role = getattr(owner, "role", None)
            for tool in task.tools or ():
                yield tool, role if isinstance(role, str) else None
    elif hasattr(target, "role") and hasattr(target, "tools"):  # an Agent
        role = target.role
        for tool in target.tools or ():
            yield tool, role if isinstance(role, str) and role else None
    elif isinstance(target, Iterable) and not isinstance(target, (str, bytes, Mapping)):
        for tool in target:
            if not isinstance(tool, BaseTool):
                raise ConfigurationError(f"{_WHERE}: {tool!r} is not a CrewAI tool (a BaseTool)")
            yield tool, None
    else:
        raise ConfigurationError(f"{_WHERE} takes a Crew, an Agent or a list of CrewAI tools, got {target!r}")


def _instrument_tool(tool: Any, options: ToolOptions, agent_id: str | None) -> None:
    options = options if options.name is not None else options.replace(name=sanitize_tool_name(tool.name))
    if isinstance(tool, Tool):  # made with @tool: the user's own function, annotations and all
        if not hasattr(tool.func, SPEC_ATTRIBUTE):
            object.__setattr__(tool, "func", _in_crewai_scope(instrument_with(tool.func, options), agent_id))
        return
    for method in ("_run", "_arun"):  # a BaseTool subclass: the methods it implements itself
        bound = getattr(tool, method)
        own = getattr(type(tool), method, None)
        if hasattr(bound, SPEC_ATTRIBUTE) or own is getattr(BaseTool, method, None):
            continue
        object.__setattr__(tool, method, _in_crewai_scope(instrument_with(bound, options), agent_id))


def _scope_ids() -> tuple[str | None, str | None]:
    """(this tool call's CrewAI event id, this run's) from CrewAI's event scope, when it has them.

    The call is the innermost ``tool_usage_started`` scope; the run is the outermost run scope
    (CrewAI runs an agent's loop as a flow of its own, inside the crew's kickoff).
    """
    try:
        stack = _crewai_events._event_id_stack.get()
        call_id = next((eid for eid, kind in reversed(stack) if kind == _CALL_SCOPE), None)
        run_id = next((eid for eid, kind in stack if kind in _RUN_SCOPES), None)
    except Exception:  # another CrewAI version: no ids, never an error in the crew
        return None, None
    return (call_id if isinstance(call_id, str) and call_id else None,
            run_id if isinstance(run_id, str) and run_id else None)


def _enter_ids(stack: ExitStack, agent_id: str | None) -> None:
    try:
        _open_id_blocks(stack, agent_id)
    except Exception as exc:  # the tool runs all the same, without the ids
        _safe.report("reading CrewAI's ids", exc)


def _open_id_blocks(stack: ExitStack, agent_id: str | None) -> None:
    call_id, run_id = _scope_ids()
    outer = current_agent()
    who = agent_id or (outer.agent_id if outer is not None else None)
    if who is not None and (agent_id is not None or run_id is not None):
        stack.enter_context(agent(who, conversation_id=run_id))
    if call_id is not None:
        stack.enter_context(tool_call_id(call_id))


def _in_crewai_scope(instrumented: Callable[..., Any], agent_id: str | None) -> Callable[..., Any]:
    """Run the instrumented tool inside ``telemetry.agent``/``tool_call_id`` blocks for its ids.

    CrewAI tools are plain or ``async`` functions; the blocks must be open while the recording
    starts, so an ``async`` tool gets an ``async`` shim that opens them when awaited.
    """
    if inspect.iscoroutinefunction(instrumented):

        @functools.wraps(instrumented)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            with ExitStack() as stack:
                _enter_ids(stack, agent_id)
                return await instrumented(*args, **kwargs)

        return run_async

    @functools.wraps(instrumented)
    def run(*args: Any, **kwargs: Any) -> Any:
        with ExitStack() as stack:
            _enter_ids(stack, agent_id)
            return instrumented(*args, **kwargs)

    return run

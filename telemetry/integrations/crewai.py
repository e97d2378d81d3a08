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

Delegation is a tool call too: the ``delegate_work_to_coworker`` and ``ask_question_to_coworker``
tools CrewAI adds at kickoff to an agent with ``allow_delegation=True`` are instrumented as they
are made, as kind ``delegate``, with the coworker asked on the span (``tool.argument.coworker``);
the coworker's own tool calls inside carry the coworker's role and their own ids.
:func:`uninstrument` puts every tool and agent back.

An id CrewAI does not expose (another version, a tool called outside a run) is simply absent;
telemetry never raises into the crew. What the user set with ``telemetry.agent()`` or
``telemetry.tool_call_id()`` wins (:func:`telemetry.instrument.framework_context`). A tool object
shared by two agents is attributed to the first one it was instrumented for; give each agent its
own instance to tell them apart.

    crew = Crew(agents=[researcher, writer], tasks=[...])
    telemetry.integrations.crewai.instrument(crew, kinds={"send_slack": "send"})

Install with ``pip install -e '/path/to/outcome-telemetry[crewai]'``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from typing_extensions import Unpack

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context, instrument_with
from ..runtime import _containment as _safe
from ._common import Choices, Selection
from ._plumbing import record_refused, replace_attribute, restore_attributes, spec_of, was_replaced

try:
    from crewai.events import event_context as _crewai_events
    from crewai.tools.base_tool import BaseTool, Tool
    from crewai.utilities.string_utils import sanitize_tool_name
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "telemetry.integrations.crewai needs CrewAI: pip install -e '/path/to/outcome-telemetry[crewai]'"
    ) from exc

__all__ = ["DELEGATION_TOOLS", "DEFAULT_EXCEPTIONS", "instrument", "uninstrument"]

T = TypeVar("T")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {}
"""None: a CrewAI tool reports failure by returning ``ToolFailure``, which the classifier reads."""

_CALL_SCOPE = "tool_usage_started"
_RUN_SCOPES = ("crew_kickoff_started", "flow_started", "lite_agent_execution_started")
_WHERE = "crewai.instrument"
_SCOPED = "__outcome_telemetry_crewai__"
DELEGATION_TOOLS = ("delegate_work_to_coworker", "ask_question_to_coworker")
"""The names CrewAI's delegation tools are called by (recorded as kind ``delegate``)."""
_COWORKER = "coworker"


def instrument(
    target: T,
    *,
    agent_name: str | None = None,
    **choices: Unpack[Choices],
) -> T:
    """Instrument every tool of ``target`` (a ``Crew``, an ``Agent``, or an iterable of tools).

    Parameters:
        kinds: tool name (the one the model calls, CrewAI's sanitised name) to
            ``read``/``write``/``send``/``delegate`` (default ``write``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code (none by default).
        agent_name: ``gen_ai.agent.id`` for tools given as a list (a crew's and an agent's
            tools get the agent's ``role``).

    Call it before ``kickoff()``. Returns ``target``, changed in place. Safe to call again:
    nothing is instrumented twice. A name in ``kinds``/``readbacks`` that is no tool is a
    :class:`ConfigurationError`.
    """
    selection = Selection(_WHERE, choices, defaults=DEFAULT_EXCEPTIONS)
    names: list[str] = []
    for tool, role in _tools_of(target):
        name = sanitize_tool_name(tool.name)
        names.append(name)
        _instrument_tool(tool, name, selection, role or agent_name)
    for agent in _agents_of(target):
        _instrument_delegation(agent, selection)
        names.extend(DELEGATION_TOOLS)
    selection.check_all_named(names)
    return target


def uninstrument(target: T) -> T:
    """Undo :func:`instrument` on the same target: tools and agents as they were. Returns ``target``."""
    for tool, _role in _tools_of(target):
        restore_attributes(tool)
    for agent in _agents_of(target):
        restore_attributes(agent)
    return target


def _agents_of(target: Any) -> list[Any]:
    """The agents of a crew, or the agent itself (whose delegation tools CrewAI makes at kickoff)."""
    if hasattr(target, "agents") and hasattr(target, "tasks"):
        agents = list(target.agents or ())
        agents += [t.agent for t in target.tasks or () if getattr(t, "agent", None) is not None]
    elif hasattr(target, "role") and hasattr(target, "tools"):
        agents = [target]
    else:
        return []
    unique: list[Any] = []
    for agent in agents:
        if not any(a is agent for a in unique) and callable(getattr(agent, "get_delegation_tools", None)):
            unique.append(agent)
    return unique


def _instrument_delegation(agent: Any, selection: Selection) -> None:
    """Instrument the delegation tools ``agent.get_delegation_tools`` makes, each time it makes them."""
    if was_replaced(agent, "get_delegation_tools"):
        return
    make = agent.get_delegation_tools
    role = agent.role if isinstance(getattr(agent, "role", None), str) and agent.role else None

    @functools.wraps(make)
    def get_delegation_tools(*args: Any, **kwargs: Any) -> Any:
        tools = make(*args, **kwargs)
        try:
            for tool in tools:
                name = sanitize_tool_name(tool.name)
                if getattr(getattr(tool, "_run", None), _SCOPED, False):
                    continue
                options = selection.options(name, kind=c.KIND_DELEGATE).replace(record_arguments=(_COWORKER,))
                wrapped = instrument_with(tool._run, options)
                replace_attribute(tool, "_run", _in_crewai_scope(wrapped, role))
        except Exception as exc:  # the delegation still happens, unrecorded
            _safe.report(c.STAGE_SPAN, "instrumenting CrewAI's delegation tools", exc)
        return tools

    replace_attribute(agent, "get_delegation_tools", get_delegation_tools)


def _tools_of(target: Any) -> Iterator[tuple[Any, str | None]]:
    """(tool, the role of the agent that owns it, or None) for each tool reachable from target."""
    if isinstance(target, BaseTool):
        yield target, None
    elif hasattr(target, "agents") and hasattr(target, "tasks"):  # a Crew
        for member in target.agents or ():
            yield from _tools_of(member)
        for task in target.tasks or ():
            role = getattr(getattr(task, "agent", None), "role", None)
            for tool in task.tools or ():
                yield tool, role if isinstance(role, str) and role else None
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


def _instrument_tool(tool: Any, name: str, selection: Selection, role: str | None) -> None:
    if isinstance(tool, Tool):  # made with @tool: the user's own function, annotations and all
        _wrap(tool, "func", tool.func, name, selection, role)
    else:
        for method in ("_run", "_arun"):  # a BaseTool subclass: the methods it implements itself
            if getattr(type(tool), method, None) is not getattr(BaseTool, method, None):
                _wrap(tool, method, getattr(tool, method), name, selection, role)
    _record_refused_input(tool, role)


def _refusing(tool: Any, validate: Callable[..., Any], role: str | None, last: dict[str, Any]) -> Callable[..., Any]:
    """``validate`` (CrewAI's check of a call's arguments) recording what it refuses as ``invalid_argument``.

    CrewAI may check one attempt twice (the structured tool, then the tool): ``last`` holds the
    call id recorded last, so an attempt is recorded once.
    """

    @functools.wraps(validate)
    def validated(*args: Any, **kwargs: Any) -> Any:
        try:
            return validate(*args, **kwargs)
        except ValueError as exc:  # CrewAI's wording of a ValidationError or a JSON error, the cause kept
            spec = next((s for s in map(spec_of, (vars(tool).get(a) for a in ("func", "_run", "_arun"))) if s), None)
            if spec is not None and exc.__cause__ is not None:
                call_id, run_id = _ids()
                if call_id is None or last.get("call_id") != call_id:
                    last["call_id"] = call_id
                    with framework_context(role, run_id, call_id):
                        record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
            raise

    return validated


def _record_refused_input(tool: Any, role: str | None) -> None:
    """Arguments the tool's ``args_schema`` refuses are a call it never saw: on ``tool.run``
    (``_validate_kwargs``) and on the structured tool a crew runs it as (``_parse_args``)."""
    if was_replaced(tool, "to_structured_tool"):
        return
    last: dict[str, Any] = {}
    validate = getattr(tool, "_validate_kwargs", None)
    if callable(validate):
        replace_attribute(tool, "_validate_kwargs", _refusing(tool, validate, role, last))
    convert = getattr(tool, "to_structured_tool", None)
    if not callable(convert):
        return

    @functools.wraps(convert)
    def to_structured_tool(*args: Any, **kwargs: Any) -> Any:
        structured = convert(*args, **kwargs)
        parse = getattr(structured, "_parse_args", None)
        if callable(parse) and hasattr(structured, "__dict__"):
            object.__setattr__(structured, "_parse_args", _refusing(tool, parse, role, last))
        return structured

    replace_attribute(tool, "to_structured_tool", to_structured_tool)


def _wrap(tool: Any, attribute: str, func: Any, name: str, selection: Selection, role: str | None) -> None:
    """Instrument ``func`` unless it already is, and give it CrewAI's ids unless it has them."""
    if getattr(func, _SCOPED, False):
        selection.instrument(name, func)  # counted as seen; left as it is
        return
    # Set past pydantic's field handling: the tool's class and fields stay as they were.
    replace_attribute(tool, attribute, _in_crewai_scope(selection.instrument(name, func), role))


def _scope_ids() -> tuple[str | None, str | None]:
    """(this tool call's CrewAI event id, this run's) from CrewAI's event scope, when it has them.

    The call is the innermost ``tool_usage_started`` scope; the run is the outermost run scope
    (CrewAI runs an agent's loop as a flow of its own, inside the crew's kickoff).
    """
    stack = _crewai_events._event_id_stack.get()
    call_id = next((eid for eid, kind in reversed(stack) if kind == _CALL_SCOPE), None)
    run_id = next((eid for eid, kind in stack if kind in _RUN_SCOPES), None)
    return (call_id if isinstance(call_id, str) and call_id else None,
            run_id if isinstance(run_id, str) and run_id else None)


def _ids() -> tuple[str | None, str | None]:
    try:
        return _scope_ids()
    except Exception as exc:  # another CrewAI version: the tool runs all the same, without the ids
        _safe.report(c.STAGE_SPAN, "reading CrewAI's ids", exc)
        return None, None


def _in_crewai_scope(instrumented: Callable[..., Any], role: str | None) -> Callable[..., Any]:
    """Run the instrumented tool inside :func:`framework_context` with CrewAI's ids.

    CrewAI tools are plain or ``async`` functions; the context must be open when the recording
    starts, so an ``async`` tool gets an ``async`` shim that opens it when awaited.
    """
    if inspect.iscoroutinefunction(instrumented):

        @functools.wraps(instrumented)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            call_id, run_id = _ids()
            with framework_context(role, run_id, call_id):
                return await instrumented(*args, **kwargs)

        setattr(run_async, _SCOPED, True)
        return run_async

    @functools.wraps(instrumented)
    def run(*args: Any, **kwargs: Any) -> Any:
        call_id, run_id = _ids()
        with framework_context(role, run_id, call_id):
            return instrumented(*args, **kwargs)

    setattr(run, _SCOPED, True)
    return run

"""Who is calling: agent identity and crew-run id, carried in a context variable.

``with telemetry.agent("planner", conversation_id=run_id):`` marks every tool span opened inside
with ``gen_ai.agent.id`` and ``gen_ai.conversation.id``. It is a :mod:`contextvars` variable, so
it follows asyncio tasks (a task copies the context it was created in). Threads do not inherit
context: a worker thread started inside the block sees no agent unless it enters its own
``agent()`` block, or runs under ``contextvars.copy_context().run(...)`` (which is what
``asyncio.to_thread`` and ``loop.run_in_executor`` with ``copy_context`` do).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..exceptions import ConfigurationError


@dataclass(frozen=True)
class AgentContext:
    """The calling agent and, when known, the crew run (conversation) it belongs to.

    ``agent_id`` is empty only when a framework integration knew the run but not the agent's
    name; the span then carries the conversation id alone.
    """

    agent_id: str
    conversation_id: str | None = None


_current_agent: ContextVar[AgentContext | None] = ContextVar("outcome_telemetry_agent", default=None)


def current_agent() -> AgentContext | None:
    """The innermost active :func:`agent` block's identity, or ``None``."""
    return _current_agent.get()


@contextmanager
def agent(agent_id: str, conversation_id: str | None = None) -> Iterator[AgentContext]:
    """Attribute every tool call inside the block to ``agent_id``.

    A nested block without its own ``conversation_id`` keeps the enclosing one, so a crew run
    set once at the top follows every agent of the run.
    """
    if not isinstance(agent_id, str) or not agent_id:
        raise ConfigurationError(f"agent_id must be a non-empty string, got {agent_id!r}")
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise ConfigurationError(f"conversation_id must be a string or None, got {conversation_id!r}")
    outer = _current_agent.get()
    if conversation_id is None and outer is not None:
        conversation_id = outer.conversation_id
    ctx = AgentContext(agent_id, conversation_id)
    token = _current_agent.set(ctx)
    try:
        yield ctx
    finally:
        _current_agent.reset(token)


_current_call_id: ContextVar[str | None] = ContextVar("outcome_telemetry_call_id", default=None)


def current_tool_call_id() -> str | None:
    """The id set by the innermost :func:`tool_call_id` block, or ``None``."""
    return _current_call_id.get()


@contextmanager
def tool_call_id(call_id: str) -> Iterator[str]:
    """Record ``call_id`` (the model's tool-call id) as ``gen_ai.tool.call.id`` on the tool span
    opened inside the block. Wrap the dispatch of one tool call::

        for call in response.tool_calls:
            with telemetry.tool_call_id(call.id):
                tools[call.name](**call.arguments)
    """
    if not isinstance(call_id, str) or not call_id:
        raise ConfigurationError(f"call_id must be a non-empty string, got {call_id!r}")
    token = _current_call_id.set(call_id)
    try:
        yield call_id
    finally:
        _current_call_id.reset(token)


_framework_set: ContextVar[tuple[AgentContext | None, AgentContext | None, str | None, str | None] | None] = ContextVar(
    "outcome_telemetry_framework_context", default=None
)
"""What the innermost :func:`framework_context` block set, and what the user had set beneath it:
(the agent context it set, the user's beneath; the call id it set, the user's beneath). A nested
block (a tool that runs another agent) sees through the first two of each pair: what a framework
set for the outer call is not the user's, so the inner call gets its own agent and call id."""


@contextmanager
def framework_context(
    agent_id: str | None, conversation_id: str | None, call_id: str | None
) -> Iterator[None]:
    """What an agent framework knows about a tool call, used where the user said nothing.

    The framework integrations wrap each tool dispatch in this block. An enclosing
    :func:`agent` block keeps its agent id and conversation id (a missing conversation id is
    filled in), and an enclosing :func:`tool_call_id` block keeps its id: what the user set
    explicitly always wins. What an enclosing ``framework_context`` block set (the outer call of
    a tool that runs another agent) does not: the inner call records its own agent, run and call
    id. Empty or non-string values are ignored, never raised about: they come from a framework,
    not from the user.
    """
    current, current_call = _current_agent.get(), _current_call_id.get()
    outer, outer_call = current, current_call  # what the user set
    mark = _framework_set.get()
    if mark is not None:
        if mark[0] is not None and current is mark[0]:
            outer = mark[1]
        if mark[2] is not None and current_call is mark[2]:
            outer_call = mark[3]
    agent_id = outer.agent_id if outer is not None else _text(agent_id)
    conversation_id = (outer.conversation_id if outer is not None else None) or _text(conversation_id)
    ours: AgentContext | None = None
    if (agent_id is not None or conversation_id is not None) and (
        outer is None or outer.conversation_id != conversation_id
    ):
        # An empty agent id carries a conversation whose agent the framework did not name.
        ours = AgentContext(agent_id or "", conversation_id)
    target = ours if ours is not None else outer
    agent_token = _current_agent.set(target) if target is not current else None
    their_call = None if outer_call is not None else _text(call_id)
    call_target = outer_call if outer_call is not None else their_call
    call_token = _current_call_id.set(call_target) if call_target is not current_call else None
    mark_token = _framework_set.set((ours, outer, their_call, outer_call))
    try:
        yield
    finally:
        _framework_set.reset(mark_token)
        if call_token is not None:
            _current_call_id.reset(call_token)
        if agent_token is not None:
            _current_agent.reset(agent_token)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

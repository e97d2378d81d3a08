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


@contextmanager
def framework_context(
    agent_id: str | None, conversation_id: str | None, call_id: str | None
) -> Iterator[None]:
    """What an agent framework knows about a tool call, used where the user said nothing.

    The framework integrations wrap each tool dispatch in this block. An enclosing
    :func:`agent` block keeps its agent id and conversation id (a missing conversation id is
    filled in), and an enclosing :func:`tool_call_id` block keeps its id: what the user set
    explicitly always wins. Empty or non-string values are ignored, never raised about: they
    come from a framework, not from the user.
    """
    outer = _current_agent.get()
    agent_id = outer.agent_id if outer is not None else _text(agent_id)
    conversation_id = (outer.conversation_id if outer is not None else None) or _text(conversation_id)
    agent_token = None
    if (agent_id is not None or conversation_id is not None) and (
        outer is None or outer.conversation_id != conversation_id
    ):
        # An empty agent id carries a conversation whose agent the framework did not name.
        agent_token = _current_agent.set(AgentContext(agent_id or "", conversation_id))
    call_id = None if _current_call_id.get() is not None else _text(call_id)
    call_token = _current_call_id.set(call_id) if call_id is not None else None
    try:
        yield
    finally:
        if call_token is not None:
            _current_call_id.reset(call_token)
        if agent_token is not None:
            _current_agent.reset(agent_token)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

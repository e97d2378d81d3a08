"""An agent traced by another project's real instrumentation, counted live by ``observe_tool_spans``.

Run as ``python peer_agent.py FORMAT RUNS OUT``: the story below runs RUNS times under FORMAT's
instrumentation, with ``telemetry.observe_tool_spans(registry=...)`` on the provider those spans
end on, and the registry's ``/metrics`` text (what Prometheus would scrape) is written to OUT.
A child process of its own, because the instrumentors patch frameworks (and traceloop installs its
provider) process-wide. Exit 4, naming the module on stderr, when FORMAT's instrumentation is not
installed.

The story (the one tests/peers tells): ``charge_card`` returns ``{"success": false, "error":
"quota_exceeded"}``, ``refund_payment`` returns ``{"status": "error", "code":
"refund_window_closed"}`` twice, ``lookup_order`` succeeds; nothing raises, and each tracer marks
its spans OK or unset.

FORMAT is ``pydantic-ai`` (its own GenAI instrumentation, content on), ``openinference-langchain``
(OpenInference's LangChain instrumentor on a LangGraph ReAct agent), ``traceloop`` (OpenLLMetry's
``@tool`` inside a ``@workflow``), or ``pydantic-ai+ours`` (pydantic-ai's instrumentation and our
pydantic-ai integration on the same tools, under ``telemetry.configure``: counted once, by the
decorator).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

import telemetry

CHARGE = {"success": False, "error": "quota_exceeded"}
REFUND = {"status": "error", "code": "refund_window_closed"}
LOOKUP = {"order_id": "o-5", "state": "shipped"}
OUTCOMES = ["quota_exceeded", "refund_window_closed"]
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("call_charge", "charge_card", {"customer_id": "c-1", "amount_cents": 3200}),
    ("call_refund_1", "refund_payment", {"payment_id": "p-9", "amount_cents": 3200}),
    ("call_refund_2", "refund_payment", {"payment_id": "p-9", "amount_cents": 3200}),
    ("call_lookup", "lookup_order", {"order_id": "o-5"}),
]
FINAL = "The charge failed, the refund window is closed, and order o-5 has shipped."
NEEDS = {
    "pydantic-ai": "pydantic_ai",
    "pydantic-ai+ours": "pydantic_ai",
    "openinference-langchain": "openinference.instrumentation.langchain",
    "traceloop": "traceloop.sdk",
}


def charge_card(customer_id: str, amount_cents: int) -> dict[str, Any]:
    """Charge a customer's card on file."""
    return dict(CHARGE)


def refund_payment(payment_id: str, amount_cents: int) -> dict[str, Any]:
    """Refund (part of) a payment."""
    return dict(REFUND)


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order's state."""
    return dict(LOOKUP)


TOOLS = [charge_card, refund_payment, lookup_order]


def _pydantic_ai_agent(provider: Any) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        if turn < len(CALLS):
            call_id, name, args = CALLS[turn]
            return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id=call_id)])
        return ModelResponse(parts=[TextPart(content=FINAL)])

    settings = InstrumentationSettings(tracer_provider=provider, include_content=True)
    return Agent(FunctionModel(script, model_name="scripted"), name="support", tools=list(TOOLS),
                 capabilities=[Instrumentation(settings=settings)])


def pydantic_ai(runs: int) -> CollectorRegistry:
    from opentelemetry.sdk.trace import TracerProvider

    registry = CollectorRegistry()
    provider = TracerProvider()
    provider.add_span_processor(telemetry.observe_tool_spans(registry=registry, outcomes=OUTCOMES))
    agent = _pydantic_ai_agent(provider)
    for _ in range(runs):
        assert agent.run_sync("charge, refund twice, look up").output == FINAL
    provider.shutdown()
    return registry


def pydantic_ai_and_ours(runs: int) -> CollectorRegistry:
    from telemetry.integrations import pydantic_ai as ours

    registry = CollectorRegistry()
    with telemetry.configure(traces_dir=None, registry=registry, install_global=False) as rt:
        rt.provider.add_span_processor(telemetry.observe_tool_spans(outcomes=OUTCOMES))
        agent = _pydantic_ai_agent(rt.provider)
        ours.instrument(agent, kinds={"charge_card": "write", "refund_payment": "write", "lookup_order": "read"})
        for _ in range(runs):
            assert agent.run_sync("charge, refund twice, look up").output == FINAL
        return _copy(registry)  # the runtime unregisters its metrics from a registry it was given


def _copy(registry: CollectorRegistry) -> CollectorRegistry:
    """A registry holding what ``registry`` holds now."""
    from prometheus_client.core import Metric

    class Frozen:
        def __init__(self, metrics: list[Metric]) -> None:
            self.metrics = metrics

        def collect(self) -> list[Metric]:
            return self.metrics

    kept = CollectorRegistry()
    kept.register(Frozen(list(registry.collect())))  # type: ignore[arg-type]
    return kept


def openinference_langchain(runs: int) -> CollectorRegistry:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt import create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider

    class ScriptedChat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    registry = CollectorRegistry()
    provider = TracerProvider()
    provider.add_span_processor(telemetry.observe_tool_spans(registry=registry, outcomes=OUTCOMES))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        tools = [StructuredTool.from_function(fn) for fn in TOOLS]
        for _ in range(runs):
            replies = [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])
                       for call_id, name, args in CALLS]
            agent = create_react_agent(ScriptedChat(responses=[*replies, AIMessage(content=FINAL)]), tools)
            agent.invoke({"messages": [("user", "charge, refund twice, look up")]}, config={"recursion_limit": 20})
    finally:
        instrumentor.uninstrument()
    provider.shutdown()
    return registry


def traceloop(runs: int) -> CollectorRegistry:
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import tool, workflow

    registry = CollectorRegistry()
    observer = telemetry.observe_tool_spans(registry=registry, outcomes=OUTCOMES)
    # No library instrumentation (instruments=set()): the decorators are what this story uses.
    Traceloop.init(app_name="peer-agent", processor=observer, telemetry_enabled=False, disable_batch=True,
                   instruments=set())
    traced = {fn.__name__: tool(name=fn.__name__)(fn) for fn in TOOLS}

    @workflow(name="support")
    def support() -> str:
        for _call_id, name, args in CALLS:
            traced[name](**args)
        return FINAL

    for _ in range(runs):
        assert support() == FINAL
    return registry


RUNNERS = {
    "pydantic-ai": pydantic_ai,
    "pydantic-ai+ours": pydantic_ai_and_ours,
    "openinference-langchain": openinference_langchain,
    "traceloop": traceloop,
}


def _refuse_network() -> None:
    """No connection to another host: the story must never leave the machine (telemetry, exporters)."""
    import socket

    def refused(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(f"peer_agent.py refuses network connections (to {address!r})")
        return connect(self, address)

    connect = socket.socket.connect
    socket.socket.connect = refused  # type: ignore[method-assign]


def main() -> int:
    fmt, runs, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    _refuse_network()
    if importlib.util.find_spec(NEEDS[fmt].split(".")[0]) is None or _missing(NEEDS[fmt]):
        print(f"missing: {NEEDS[fmt]}", file=sys.stderr)
        return 4
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    registry = RUNNERS[fmt](runs)
    out.write_text(generate_latest(registry).decode("utf-8"), encoding="utf-8")
    return 0


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        return True


if __name__ == "__main__":
    sys.exit(main())

"""The peer-trace story, in every format another instrumentation writes, as OTLP JSON lines.

An agent charges a card (the result says ``{"success": false, "error": "quota_exceeded"}``),
refunds twice with identical arguments (``{"status": "error", "code": "refund_window_closed"}``
both times) and looks the order up (fine). Every tracer marks every span OK or leaves it unset.

``python tests/forensics/peer_story.py`` writes ``peer_fixtures/<format>.jsonl``, the small
fixtures the span-format layer's tests read: ``genai`` from a real pydantic-ai agent run with its
own OpenTelemetry instrumentation (content capture on), the others built by hand after each
format's specification (OpenInference's LangChain instrumentation, OpenLLMetry's ``@tool``,
Langfuse's ``@observe(as_type="tool")``, MLflow's ``@mlflow.trace(span_type="TOOL")`` and
logfire's plain ``@logfire.instrument``, which carries no tool marker), because those
instrumentors do not install here. The builders are also used directly by tests that need a
variant (a hostile result, a missing call id).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from telemetry import conventions as c  # noqa: E402

from forensics_builder import any_value, hex_id, ns  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "peer_fixtures"
CHARGE_RESULT = {"success": False, "error": "quota_exceeded"}
REFUND_RESULT = {"status": "error", "code": "refund_window_closed"}
LOOKUP_RESULT = {"order_id": "o-1", "state": "paid"}
CHARGE_ARGS = {"order_id": "o-1", "amount_cents": 1200}
REFUND_ARGS = {"order_id": "o-1", "amount_cents": 1200}
LOOKUP_ARGS = {"order_id": "o-1"}
STORY: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("charge", CHARGE_ARGS, CHARGE_RESULT),
    ("refund", REFUND_ARGS, REFUND_RESULT),
    ("refund", dict(reversed(list(REFUND_ARGS.items()))), REFUND_RESULT),  # the same arguments, another key order
    ("lookup_order", LOOKUP_ARGS, LOOKUP_RESULT),
)
"""(tool, arguments, result) in call order."""
SELECTED_GLOB = "Calling shop.tools.*"
"""The ``--tool-spans`` glob that selects the logfire fixture's function spans."""
FORMAT_NAMES = (c.FORMAT_GENAI, c.FORMAT_OPENINFERENCE, c.FORMAT_TRACELOOP, c.FORMAT_LANGFUSE, c.FORMAT_MLFLOW,
                c.FORMAT_SELECTED)


def span(trace: str, name: str, serial: int, t: float, attributes: dict[str, Any], *, parent: str | None = None,
         status: int = 0, span_id: str | None = None) -> dict[str, Any]:
    """One OTLP span (status 0 unset, 1 ok), its attributes encoded as AnyValues."""
    sid = span_id or hex_id(f"{trace}:{serial}", 16)
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent or "", "name": name, "kind": 1,
            "startTimeUnixNano": str(ns(t)), "endTimeUnixNano": str(ns(t) + 2_000_000),
            "attributes": [{"key": k, "value": any_value(v)} for k, v in attributes.items() if v is not None],
            "status": {"code": status}}


def line(spans: list[dict[str, Any]], service: str = "shop-agent", scope: str = "peer") -> str:
    """One TracesData line of ``spans``."""
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": c.SERVICE_NAME, "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}]}, separators=(",", ":"))


def openinference(run: str = "oi") -> list[dict[str, Any]]:
    """OpenInference's LangChain instrumentation: an agent chain, one LLM span per step naming the
    tool call it asks for (the call id only there), then the TOOL span, its output a serialised
    ``ToolMessage``."""
    trace = hex_id("trace:" + run, 32)
    root = span(trace, "AgentExecutor", 0, 0.0, {c.OPENINFERENCE_SPAN_KIND: "CHAIN", c.OI_SESSION_ID: f"session-{run}",
                                                 c.OI_INPUT_VALUE: '{"input": "refund order o-1"}'}, status=1)
    out = [root]
    for n, (tool, args, result) in enumerate(STORY):
        llm = span(trace, "ChatOpenAI", 10 + n, 1.0 + n, {
            c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_LLM, c.OI_SESSION_ID: f"session-{run}",
            f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.role": "assistant",
            f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.id": f"call_{run}_{n}",
            f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.function.name": tool,
            f"{c.OI_LLM_OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.function.arguments": json.dumps(args),
        }, parent=root["spanId"], status=1)
        message = {"type": "tool", "data": {"content": json.dumps(result), "type": "tool",
                                            "tool_call_id": f"call_{run}_{n}", "status": "success"}}
        tool_span = span(trace, tool, 20 + n, 1.5 + n, {
            c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_TOOL, c.OI_TOOL_NAME: tool, c.OI_SESSION_ID: f"session-{run}",
            c.OI_INPUT_VALUE: json.dumps(args), "input.mime_type": "application/json",
            c.OI_OUTPUT_VALUE: json.dumps(message), "output.mime_type": "application/json",
        }, parent=root["spanId"], status=1)
        out += [llm, tool_span]
    return out


def traceloop(run: str = "tl") -> list[dict[str, Any]]:
    """OpenLLMetry: a ``@workflow`` span and its ``@tool`` spans (input ``{"args", "kwargs"}``)."""
    trace = hex_id("trace:" + run, 32)
    root = span(trace, "refund_flow.workflow", 0, 0.0, {c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_WORKFLOW,
                                                        c.TRACELOOP_ENTITY_NAME: "refund_flow",
                                                        c.TRACELOOP_WORKFLOW_NAME: "refund_flow"})
    out = [root]
    for n, (tool, args, result) in enumerate(STORY):
        out.append(span(trace, f"{tool}.tool", 1 + n, 1.0 + n, {
            c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_TOOL, c.TRACELOOP_ENTITY_NAME: tool,
            c.TRACELOOP_WORKFLOW_NAME: "refund_flow",
            c.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [], "kwargs": args}),
            c.TRACELOOP_ENTITY_OUTPUT: json.dumps(result)}, parent=root["spanId"]))
    return out


def langfuse(run: str = "lf") -> list[dict[str, Any]]:
    """Langfuse's ``@observe(as_type="tool")``: the span name is the tool's name."""
    trace = hex_id("trace:" + run, 32)
    root = span(trace, "agent", 0, 0.0, {c.LANGFUSE_OBSERVATION_TYPE: "span", c.LANGFUSE_SESSION_ID: f"session-{run}"})
    out = [root]
    for n, (tool, args, result) in enumerate(STORY):
        out.append(span(trace, tool, 1 + n, 1.0 + n, {
            c.LANGFUSE_OBSERVATION_TYPE: c.LANGFUSE_KIND_TOOL, c.LANGFUSE_SESSION_ID: f"session-{run}",
            c.LANGFUSE_OBSERVATION_INPUT: json.dumps({"args": [], "kwargs": args}),
            c.LANGFUSE_OBSERVATION_OUTPUT: json.dumps(result)}, parent=root["spanId"]))
    return out


def mlflow(run: str = "ml") -> list[dict[str, Any]]:
    """MLflow's ``@mlflow.trace(span_type="TOOL")``: every attribute JSON-encoded."""
    trace = hex_id("trace:" + run, 32)
    request = json.dumps(f"tr-{run}")
    root = span(trace, "agent", 0, 0.0, {c.MLFLOW_SPAN_TYPE: json.dumps("AGENT"), c.MLFLOW_TRACE_REQUEST_ID: request}, status=1)
    out = [root]
    for n, (tool, args, result) in enumerate(STORY):
        out.append(span(trace, tool, 1 + n, 1.0 + n, {
            c.MLFLOW_SPAN_TYPE: json.dumps(c.MLFLOW_KIND_TOOL), c.MLFLOW_TRACE_REQUEST_ID: request,
            c.MLFLOW_SPAN_INPUTS: json.dumps(args), c.MLFLOW_SPAN_OUTPUTS: json.dumps(result)},
            parent=root["spanId"], status=1))
    return out


def logfire(run: str = "lg") -> list[dict[str, Any]]:
    """logfire's plain ``@logfire.instrument(record_return=True)``: no tool marker; each argument
    is its own attribute, listed with ``return`` in ``logfire.json_schema``."""
    trace = hex_id("trace:" + run, 32)
    root = span(trace, "agent run", 0, 0.0, {"logfire.span_type": "span", "logfire.msg": "agent run"})
    out = [root]
    for n, (tool, args, result) in enumerate(STORY):
        schema = {"type": "object", "properties": {**{k: {} for k in args}, "return": {"type": "object"}}}
        out.append(span(trace, f"Calling shop.tools.{tool}", 1 + n, 1.0 + n, {
            "logfire.span_type": "span", "logfire.msg_template": f"Calling shop.tools.{tool}",
            c.CODE_FUNCTION: tool, "code.namespace": "shop.tools", **args,
            c.LOGFIRE_JSON_SCHEMA: json.dumps(schema), c.LOGFIRE_RETURN: json.dumps(result)}, parent=root["spanId"]))
    return out


def genai_from_pydantic_ai() -> list[str]:
    """The story run by a real pydantic-ai agent (FunctionModel) with its OpenTelemetry
    instrumentation, content capture on, encoded by our OTLP JSON encoder: its lines."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from telemetry.runtime._otlp_json import encode_traces_data

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step < len(STORY):
            tool, args, _ = STORY[step]
            return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"call-{step}")])
        return ModelResponse(parts=[TextPart("done")])

    settings = InstrumentationSettings(tracer_provider=provider, include_content=True)
    agent = Agent(FunctionModel(model), capabilities=[Instrumentation(settings=settings)])
    @agent.tool_plain
    def charge(order_id: str, amount_cents: int) -> dict[str, Any]:
        return CHARGE_RESULT

    @agent.tool_plain
    def refund(order_id: str, amount_cents: int) -> dict[str, Any]:
        return REFUND_RESULT

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        return LOOKUP_RESULT

    agent.run_sync("refund order o-1")
    provider.shutdown()
    return [json.dumps(encode_traces_data([s]), separators=(",", ":")) for s in exporter.get_finished_spans()]


BUILDERS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    c.FORMAT_OPENINFERENCE: openinference, c.FORMAT_TRACELOOP: traceloop, c.FORMAT_LANGFUSE: langfuse,
    c.FORMAT_MLFLOW: mlflow, c.FORMAT_SELECTED: logfire,
}


def fixture(fmt: str) -> Path:
    """The committed fixture file of format ``fmt``."""
    return FIXTURES / f"{fmt}.jsonl"


def write_fixtures(folder: Path = FIXTURES) -> list[Path]:
    """Write every format's story to ``folder/<format>.jsonl``; return the files."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in FORMAT_NAMES:
        lines = genai_from_pydantic_ai() if fmt == c.FORMAT_GENAI else [line(BUILDERS[fmt]())]
        path = folder / f"{fmt}.jsonl"
        path.write_text("".join(text + "\n" for text in lines), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written in write_fixtures():
        print(written)

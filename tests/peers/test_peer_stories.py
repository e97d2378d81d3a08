"""What each peer instrumentation writes for the story of ``tests/peers/story.py``.

Every format is generated once per session, all at once, each in a subprocess (see
``generate.py``); each test then runs on that file ("live") and on the committed fixture
("fixture"), so the fixtures the reader's unit tests use are held to the same description. A
format whose packages are not importable is skipped, except in CI (``CI=true``), where it fails.

The assertions are what the peers were seen to write, not what we would like them to write:
they document where each one keeps a tool call's name, arguments, result, call id, session and
status, and that none of them marks the story's failures as errors.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from . import story
from .generate import FIXTURES, FORMATS, ROOT, Outcome, generate, missing_packages, read_lines, stabilise
from .spans import Span, check_collector_json, read_spans

SOURCES = (pytest.param("live", marks=pytest.mark.slow), "fixture")
NAMES = [name for _, name, _ in story.CALLS]  # charge_card, refund_payment, refund_payment, lookup_order
CALL_IDS = [call_id for call_id, _, _ in story.CALLS]
ARGS = [args for _, _, args in story.CALLS]
RESULTS = [story.result_of(name) for name in NAMES]
OK, UNSET = 1, 0


def _in_ci() -> bool:
    return os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def peer_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Outcome], dict[str, list[str]]]:
    """Every format whose packages are importable, generated once per run, in parallel subprocesses.

    Under pytest-xdist the first worker to get here generates for all of them (the others wait on
    a lock in the run's shared temporary directory and read what it wrote), so the files are made
    once per run, not once per worker.
    """
    missing = {name: m for name, fmt in FORMATS.items() if (m := missing_packages(fmt))}
    runnable = [name for name in FORMATS if name not in missing]
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    outdir, manifest = shared / "peer-stories", shared / "peer-stories.json"
    with open(shared / "peer-stories.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if manifest.exists():
            done = {o["name"]: Outcome(**{**o, "path": Path(o["path"])}) for o in json.loads(manifest.read_text())}
        else:
            done = generate(outdir, runnable) if runnable else {}
            manifest.write_text(json.dumps([{**vars(o), "path": str(o.path)} for o in done.values()]))
    return {name: done[name] for name in runnable if name in done}, missing


@pytest.fixture
def spans_of(request: pytest.FixtureRequest) -> Any:
    def load(name: str, source: str) -> list[Span]:
        if source == "fixture":
            return read_spans(FIXTURES / f"{name}.jsonl")
        outcomes, missing = request.getfixturevalue("peer_runs")
        if name in missing:
            message = f"{name}: {', '.join(missing[name])} not importable; pip install {FORMATS[name].distributions}"
            if _in_ci():
                pytest.fail(message)
            pytest.skip(message)
        outcome = outcomes[name]
        assert outcome.returncode == 0, f"{name} failed:\n{outcome.stderr[-4000:]}"
        assert not outcome.network, f"{name} tried the network: {outcome.network}"
        return read_spans(outcome.path)

    return load


def _one_trace(spans: list[Span]) -> Span:
    assert len({s.trace_id for s in spans}) == 1
    roots = [s for s in spans if s.parent_id is None]
    assert len(roots) == 1, [r.name for r in roots]
    return roots[0]


def _parsed(value: str) -> Any:
    return json.loads(value)


# ---- the file itself -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_live_file_is_collector_otlp_json(name: str, spans_of: Any, peer_runs: Any) -> None:
    """Each generated file is Collector file-exporter JSON: TracesData lines, hex ids, int64s as strings."""
    spans_of(name, "live")  # skips or fails as the format's packages say
    assert check_collector_json(peer_runs[0][name].path) > 0


@pytest.mark.parametrize("name", FORMATS)
def test_fixture_is_collector_otlp_json_and_stable(name: str) -> None:
    """Each committed fixture is Collector JSON, one span a line, and already in its stabilised form."""
    path = FIXTURES / f"{name}.jsonl"
    assert check_collector_json(path) == len(path.read_text().splitlines())
    assert path.stat().st_size < 200_000
    lines = read_lines(path)
    assert stabilise(name, lines) == lines  # regenerating the fixture from itself changes nothing
    spans = read_spans(path)
    assert min(s.start for s in spans) == 1767225600_000_000_000


def test_network_guard_refuses_and_records(tmp_path: Path) -> None:
    """The generator's subprocess guard refuses an Internet connection and lists the attempt."""
    record = tmp_path / "net"
    code = ("import socket, sys; from pathlib import Path; from tests.peers.generate import _guard_network\n"
            f"_guard_network(Path({str(record)!r}))\n"
            "try:\n    socket.create_connection(('192.0.2.1', 80), timeout=1)\nexcept ConnectionRefusedError: pass\n"
            "s = socket.socket()\n"
            "try:\n    s.connect(('127.0.0.1', 9))\nexcept ConnectionRefusedError: pass\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    assert record.read_text().splitlines() == ["create_connection ('192.0.2.1', 80)", "connect ('127.0.0.1', 9)"]


# ---- OpenInference: LangChain / LangGraph ------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_openinference_langchain(source: str, spans_of: Any) -> None:
    """OpenInference on LangGraph: TOOL spans carry tool.name, input.value args, a ToolMessage in output.value, all OK."""
    spans = spans_of("openinference_langchain", source)
    root = _one_trace(spans)
    assert (root.name, root.attributes["openinference.span.kind"]) == ("LangGraph", "CHAIN")
    assert {s.scope for s in spans} == {"openinference.instrumentation.langchain"}
    assert {s.status for s in spans} == {OK}  # OpenInference sets OK on every span it ends without an exception

    tools = [s for s in spans if s.attributes.get("openinference.span.kind") == "TOOL"]
    assert [s.name for s in tools] == [s.attributes["tool.name"] for s in tools] == NAMES
    for span, call_id, args, result in zip(tools, CALL_IDS, ARGS, RESULTS):
        if len(args) > 1:
            assert span.json("input.value") == args and span.attributes["input.mime_type"] == "application/json"
        else:  # a one-argument call loses its argument's name: the bare string, and no mime type
            (value,) = args.values()
            assert span.attributes["input.value"] == value and "input.mime_type" not in span.attributes
        message = span.json("output.value")  # LangChain's ToolMessage, serialised as {"type": "tool", "data": {...}}
        assert message["type"] == "tool"
        assert message["data"]["tool_call_id"] == call_id  # the call id: only here on the tool span
        assert message["data"]["status"] == "success"  # LangChain's own verdict: the tool returned
        assert json.loads(message["data"]["content"]) == result  # the returned dict, as JSON text
        assert span.attributes["session.id"] == story.SESSION_ID  # from the run config's metadata session_id
        assert "user.id" not in span.attributes  # metadata user_id stays inside the metadata JSON
        assert span.json("metadata")["user_id"] == story.USER_ID
        assert not any("call" in key for key in span.attributes)
        parent = next(s for s in spans if s.span_id == span.parent_id)
        assert (parent.name, parent.attributes["openinference.span.kind"]) == ("tools", "CHAIN")

    llms = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(llms) == 5 and {s.name for s in llms} == {"ScriptedChat"}
    for span, call_id, name, args in zip(llms, CALL_IDS, NAMES, ARGS):
        prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
        assert span.attributes[prefix + "id"] == call_id
        assert span.attributes[prefix + "function.name"] == name
        assert json.loads(span.attributes[prefix + "function.arguments"]) == args
    last = llms[-1].attributes  # the history the model saw: each result with its call id, role "tool"
    for i, (call_id, result) in enumerate(zip(CALL_IDS, RESULTS)):
        at = f"llm.input_messages.{2 + 2 * i}.message."
        assert (last[at + "role"], last[at + "tool_call_id"]) == ("tool", call_id)
        assert json.loads(last[at + "content"]) == result
    assert last["llm.output_messages.0.message.content"] == story.FINAL_ANSWER


# ---- OpenInference: OpenAI Agents SDK ---------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_openinference_openai_agents(source: str, spans_of: Any) -> None:
    """OpenInference on the Agents SDK: TOOL spans hold plain JSON in and out, no call id; LLM spans hold the ids."""
    spans = spans_of("openinference_openai_agents", source)
    root = _one_trace(spans)
    assert (root.name, root.attributes["openinference.span.kind"]) == ("payments-story", "AGENT")  # the workflow_name
    assert {s.scope for s in spans} == {"openinference.instrumentation.openai_agents"}
    assert {s.status for s in spans} == {OK}
    assert all(s.attributes["session.id"] == story.SESSION_ID for s in spans)  # from using_session(); group_id is not recorded
    assert not any(v == story.SESSION_ID for s in spans for k, v in s.attributes.items() if k != "session.id")

    tools = [s for s in spans if s.attributes["openinference.span.kind"] == "TOOL"]
    assert [s.name for s in tools] == [s.attributes["tool.name"] for s in tools] == NAMES
    for span, args, result in zip(tools, ARGS, RESULTS):
        assert span.json("input.value") == args
        assert span.json("output.value") == result  # the returned dict as JSON, not wrapped
        assert span.attributes["tool.description"] == story.TOOLS[span.name].__doc__
        assert not any("call" in key for key in span.attributes)
        parent = next(s for s in spans if s.span_id == span.parent_id)
        assert parent.name == "turn"

    llms = [s for s in spans if s.attributes["openinference.span.kind"] == "LLM"]
    assert [s.name for s in llms] == ["response"] * 5
    for span, call_id, name, args in zip(llms, CALL_IDS, NAMES, ARGS):
        prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
        assert span.attributes[prefix + "id"] == call_id
        assert (span.attributes[prefix + "function.name"], json.loads(span.attributes[prefix + "function.arguments"])) == (name, args)
        assert span.attributes["llm.model_name"] == "gpt-4o-mini"
    last = llms[-1].attributes
    for i, (call_id, result) in enumerate(zip(CALL_IDS, RESULTS)):
        at = f"llm.input_messages.{3 + 2 * i}.message."
        assert (last[at + "role"], last[at + "tool_call_id"]) == ("tool", call_id)
        assert last[at + "content"] == str(result)  # what the SDK sent the model: the dict's Python repr
    tool_parents = {s.parent_id for s in tools}
    assert all(any(llm.parent_id == p for llm in llms) for p in tool_parents)  # each tool span is a sibling of its LLM span


# ---- pydantic-ai (OpenTelemetry GenAI semantic conventions) ---------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_pydantic_ai(source: str, spans_of: Any) -> None:
    """pydantic-ai: execute_tool spans carry gen_ai.tool.name/.call.id/.call.arguments/.call.result; status UNSET."""
    spans = spans_of("pydantic_ai", source)
    root = _one_trace(spans)
    assert root.name == "invoke_agent support" and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["final_result"] == story.FINAL_ANSWER
    assert {s.scope for s in spans} == {"pydantic-ai"}
    assert {s.status for s in spans} == {UNSET}
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {story.SESSION_ID}  # run_sync(conversation_id=...)
    assert len({s.attributes["gen_ai.agent.call.id"] for s in spans}) == 1  # one UUID per run, on every span

    tools = [s for s in spans if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert [s.name for s in tools] == [f"execute_tool {n}" for n in NAMES]
    for span, call_id, name, args, result in zip(tools, CALL_IDS, NAMES, ARGS, RESULTS):
        assert span.attributes["gen_ai.tool.name"] == name
        assert span.attributes["gen_ai.tool.call.id"] == call_id
        assert span.json("gen_ai.tool.call.arguments") == args  # compact JSON text
        assert span.json("gen_ai.tool.call.result") == result  # recorded because include_content=True (the default)
        assert span.kind == 1 and span.parent_id == root.span_id

    chats = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    assert [s.name for s in chats] == ["chat scripted"] * 5 and {s.kind for s in chats} == {3}  # CLIENT
    for span, call_id, name, args in zip(chats, CALL_IDS, NAMES, ARGS):
        (message,) = span.json("gen_ai.output.messages")
        assert message["parts"] == [{"type": "tool_call", "id": call_id, "name": name, "arguments": args}]
    history = chats[-1].json("gen_ai.input.messages")
    returned = [p for m in history for p in m["parts"] if p["type"] == "tool_call_response"]
    assert [(p["id"], p["name"], p["result"]) for p in returned] == list(zip(CALL_IDS, NAMES, RESULTS))
    assert {m["role"] for m in history if any(p["type"] == "tool_call_response" for p in m["parts"])} == {"user"}  # version 5


# ---- OpenLLMetry (traceloop-sdk) --------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_openllmetry(source: str, spans_of: Any) -> None:
    """OpenLLMetry: <name>.tool spans carry traceloop.entity.input/output and gen_ai.tool.name, no call id; UNSET."""
    spans = spans_of("openllmetry", source)
    root = _one_trace(spans)
    assert (root.name, root.attributes["traceloop.span.kind"]) == ("payments_story.workflow", "workflow")
    assert {s.scope for s in spans} == {"traceloop.tracer", "opentelemetry.instrumentation.openai.v1"}
    assert {s.status for s in spans} == {UNSET}
    assert {s.attributes["traceloop.association.properties.session_id"] for s in spans} == {story.SESSION_ID}
    assert {s.attributes["traceloop.association.properties.user_id"] for s in spans} == {story.USER_ID}
    assert "gen_ai.conversation.id" not in root.attributes  # @conversation sits inside @workflow: below the root only
    assert {s.attributes["gen_ai.conversation.id"] for s in spans if s is not root} == {story.SESSION_ID}

    tools = [s for s in spans if s.attributes.get("traceloop.span.kind") == "tool"]
    assert [s.name for s in tools] == [f"{n}.tool" for n in NAMES]
    for span, name, args, result in zip(tools, NAMES, ARGS, RESULTS):
        assert span.attributes["traceloop.entity.name"] == span.attributes["gen_ai.tool.name"] == name
        assert span.json("traceloop.entity.input") == {"args": [], "kwargs": args}
        assert span.json("traceloop.entity.output") == result
        assert span.attributes["traceloop.workflow.name"] == "payments_story"
        assert span.attributes["gen_ai.agent.name"] == "support"
        assert not any("call" in key for key in span.attributes)

    chats = [s for s in spans if s.scope == "opentelemetry.instrumentation.openai.v1"]
    assert [s.name for s in chats] == ["openai.chat"] * 5 and {s.kind for s in chats} == {3}
    for span, call_id, name, args in zip(chats, CALL_IDS, NAMES, ARGS):
        (message,) = span.json("gen_ai.output.messages")
        assert message["parts"] == [{"type": "tool_call", "name": name, "id": call_id, "arguments": args}]
        assert message["finish_reason"] == "tool_call"
    history = chats[-1].json("gen_ai.input.messages")
    returned = [p for m in history if m["role"] == "tool" for p in m["parts"]]
    assert [(p["type"], p["id"], json.loads(p["response"])) for p in returned] == [
        ("tool_call_response", c, r) for c, r in zip(CALL_IDS, RESULTS)]


# ---- logfire ---------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_logfire(source: str, spans_of: Any) -> None:
    """logfire: each argument is its own attribute, the result is `return` (only with record_return=True); UNSET."""
    spans = spans_of("logfire", source)
    root = _one_trace(spans)
    assert root.name == "support agent run {prompt}" and root.attributes["prompt"] == story.PROMPT  # name = template
    assert {s.scope for s in spans} == {"logfire", "logfire.openai"}
    assert {s.status for s in spans} == {UNSET}
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {story.SESSION_ID}  # baggage, a scrubber-safe key
    assert {s.attributes["user_id"] for s in spans} == {story.USER_ID}
    for span in spans:  # baggage session_id: blanked by the default scrubber, except on logfire.openai spans
        expected = story.SESSION_ID if span.scope == "logfire.openai" else "[Scrubbed due to 'session']"
        assert span.attributes["session_id"] == expected

    tools = [s for s in spans if s.scope == "logfire" and s is not root]
    assert [s.name for s in tools] == [s.attributes["code.function"] for s in tools] == NAMES
    for span, name, args, result in zip(tools, NAMES, ARGS, RESULTS):
        assert {k: span.attributes[k] for k in args} == args  # typed: amount_cents is an intValue
        assert span.json("return") == result
        assert span.attributes["logfire.msg"] == f"running tool {name}" and span.attributes["logfire.span_type"] == "span"
        assert set(span.json("logfire.json_schema")["properties"]) == {*args, "return"}
        assert json.loads(span.attributes["logfire.scrubbed"]) == [
            {"path": ["attributes", "session_id"], "matched_substring": "session"}]
        assert not any("call" in key for key in span.attributes)

    chats = [s for s in spans if s.scope == "logfire.openai"]
    assert [s.name for s in chats] == ["Chat Completion with {request_data[model]!r}"] * 5 and {s.kind for s in chats} == {3}
    for span, call_id, name, args in zip(chats, CALL_IDS, NAMES, ARGS):
        (message,) = span.json("gen_ai.output.messages")
        assert message["parts"] == [{"type": "tool_call", "id": call_id, "name": name, "arguments": args}]
        assert span.attributes["logfire.msg"] == "Chat Completion with 'gpt-4o-mini'"
    history = chats[-1].json("gen_ai.input.messages")
    returned = [p for m in history if m["role"] == "tool" for p in m["parts"]]
    assert [(p["id"], json.loads(p["response"])) for p in returned] == list(zip(CALL_IDS, RESULTS))


# ---- Langfuse --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_langfuse(source: str, spans_of: Any) -> None:
    """Langfuse: tool observations carry langfuse.observation.input/output and session.id; no call id; UNSET."""
    spans = spans_of("langfuse", source)
    root = _one_trace(spans)
    assert (root.name, root.attributes["langfuse.observation.type"]) == ("support", "agent")
    assert root.attributes["langfuse.internal.is_app_root"] is True
    assert {(s.scope, s.scope_attributes["public_key"]) for s in spans} == {("langfuse-sdk", "pk-lf-peer-story")}
    assert {s.status for s in spans} == {UNSET}
    assert {(s.attributes["session.id"], s.attributes["user.id"]) for s in spans} == {(story.SESSION_ID, story.USER_ID)}
    assert {s.attributes["langfuse.trace.name"] for s in spans} == {"payments-story"}

    tools = [s for s in spans if s.attributes["langfuse.observation.type"] == "tool"]
    assert [s.name for s in tools] == NAMES
    for span, args, result in zip(tools, ARGS, RESULTS):
        assert span.json("langfuse.observation.input") == {"args": [], "kwargs": args}
        assert span.json("langfuse.observation.output") == result
        assert not any("call" in key for key in span.attributes)

    generations = [s for s in spans if s.attributes["langfuse.observation.type"] == "generation"]
    assert [s.name for s in generations] == ["OpenAI-generation"] * 5
    for span, call_id, name, args in zip(generations, CALL_IDS, NAMES, ARGS):
        (call,) = span.json("langfuse.observation.output")["tool_calls"]
        assert (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"])) == (call_id, name, args)
        assert span.attributes["langfuse.observation.model.name"] == "gpt-4o-mini"
    history = generations[-1].json("langfuse.observation.input")["messages"]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in history if m["role"] == "tool"] == list(zip(CALL_IDS, RESULTS))


# ---- MLflow ----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_mlflow(source: str, spans_of: Any) -> None:
    """MLflow (OTel export): every attribute is JSON text, TOOL spans hold mlflow.spanInputs/Outputs; OK; no session."""
    spans = spans_of("mlflow", source)
    root = _one_trace(spans)
    assert root.name == "support" and root.json("mlflow.spanType") == "AGENT"
    assert root.json("mlflow.spanOutputs") == story.FINAL_ANSWER
    assert {s.scope for s in spans} == {"mlflow.tracing.provider"}
    assert spans[0].resource["telemetry.sdk.name"] == "mlflow"
    assert {s.status for s in spans} == {OK}
    assert {s.json("mlflow.traceRequestId") for s in spans} == {f"tr-{root.trace_id}"}
    assert not any(story.SESSION_ID in json.dumps(s.attributes) for s in spans)  # trace metadata is not exported

    tools = [s for s in spans if s.json("mlflow.spanType") == "TOOL"]
    assert [s.name for s in tools] == [s.json("mlflow.spanFunctionName") for s in tools] == NAMES
    for span, args, result in zip(tools, ARGS, RESULTS):
        assert span.json("mlflow.spanInputs") == args
        assert span.json("mlflow.spanOutputs") == result
        assert not any("call" in key for key in span.attributes)

    chats = [s for s in spans if s.json("mlflow.spanType") == "CHAT_MODEL"]
    assert [s.name for s in chats] == ["Completions"] * 5
    for span, call_id, name, args in zip(chats, CALL_IDS, NAMES, ARGS):
        (call,) = span.json("mlflow.spanOutputs")["choices"][0]["message"]["tool_calls"]
        assert (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"])) == (call_id, name, args)
        assert span.json("mlflow.message.format") == "openai"
    history = chats[-1].json("mlflow.spanInputs")["messages"]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in history if m["role"] == "tool"] == list(zip(CALL_IDS, RESULTS))


@pytest.mark.parametrize("source", SOURCES)
def test_mlflow_genai(source: str, spans_of: Any) -> None:
    """MLflow with MLFLOW_ENABLE_OTEL_GENAI_SEMCONV: execute_tool spans with gen_ai.tool.call.arguments/result, no call id; OK."""
    spans = spans_of("mlflow_genai", source)
    root = _one_trace(spans)
    assert (root.name, root.attributes) == ("invoke_agent support", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})
    assert {s.scope for s in spans} == {"mlflow.tracing.provider"}
    assert {s.status for s in spans} == {OK}
    assert not any(k.startswith("mlflow.") for s in spans for k in s.attributes)  # the mlflow.* attributes are replaced

    tools = [s for s in spans if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert [s.name for s in tools] == [f"execute_tool {n}" for n in NAMES] and {s.kind for s in tools} == {1}
    for span, name, args, result in zip(tools, NAMES, ARGS, RESULTS):
        assert span.attributes["gen_ai.tool.name"] == name
        assert span.json("gen_ai.tool.call.arguments") == args
        assert span.json("gen_ai.tool.call.result") == result
        assert set(span.attributes) == {"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.arguments",
                                        "gen_ai.tool.call.result"}  # no gen_ai.tool.call.id: MLflow's TOOL span never knew it

    chats = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    assert [s.name for s in chats] == ["chat gpt-4o-mini"] * 5 and {s.kind for s in chats} == {3}
    for span, call_id, name, args in zip(chats, CALL_IDS, NAMES, ARGS):
        (message,) = span.json("gen_ai.output.messages")
        assert message["parts"] == [{"type": "tool_call", "id": call_id, "name": name, "arguments": args}]
        assert span.json("model") == "gpt-4o-mini"  # one of MLflow's own attributes left untranslated, still JSON text
    history = chats[-1].json("gen_ai.input.messages")
    returned = [p for m in history if m["role"] == "tool" for p in m["parts"]]
    assert [(p["type"], p["id"], json.loads(p["response"])) for p in returned] == [
        ("tool_call_response", c, r) for c, r in zip(CALL_IDS, RESULTS)]

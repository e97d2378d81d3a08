"""pydantic-ai's own OpenTelemetry instrumentation (GenAI semantic conventions) on a FunctionModel agent."""

from __future__ import annotations

import sys
from pathlib import Path

from . import story
from .exporter import CollectorFileExporter

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run the story with the ``Instrumentation`` capability (``include_content=True``); write ``path``."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = CollectorFileExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "peer-story-pydantic-ai"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    turn = {"n": 0}

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = turn["n"]
        turn["n"] += 1
        if n < len(story.CALLS):
            call_id, name, args = story.CALLS[n]
            return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id=call_id)])
        return ModelResponse(parts=[TextPart(content=story.FINAL_ANSWER)])

    settings = InstrumentationSettings(tracer_provider=provider, include_content=True)
    agent: Agent[None, str] = Agent(FunctionModel(script, model_name="scripted"), name="support",
                                    tools=list(story.TOOLS.values()),
                                    capabilities=[Instrumentation(settings=settings)])
    agent.run_sync(story.PROMPT, conversation_id=story.SESSION_ID)
    provider.shutdown()


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

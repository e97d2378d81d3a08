"""OpenInference's OpenAI Agents instrumentor on an Agents SDK run whose Model replies from a script."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from . import story
from .exporter import CollectorFileExporter
from .scripted_openai import responses_client

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run the story with ``Runner.run`` under OpenAIAgentsInstrumentor (exclusive: no OpenAI export); write ``path``."""
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    # The SDK's real Responses model (its response_span becomes the LLM spans) on a scripted transport.
    model = OpenAIResponsesModel(model="gpt-4o-mini", openai_client=responses_client())
    exporter = CollectorFileExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "peer-story-openinference-openai-agents"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)

    agent = Agent(name="support", instructions="Help with payments and orders.", model=model,
                  tools=[function_tool(fn) for fn in story.TOOLS.values()])
    config = RunConfig(workflow_name="payments-story", group_id=story.SESSION_ID)
    with using_session(story.SESSION_ID):
        asyncio.run(Runner.run(agent, story.PROMPT, run_config=config))
    provider.shutdown()


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

"""OpenInference's LangChain instrumentor on a LangGraph ReAct agent driven by a scripted chat model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from . import story
from .exporter import CollectorFileExporter

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run the story through ``create_react_agent`` with OpenInference's LangChainInstrumentor; write ``path``."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt import create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    class ScriptedChat(FakeMessagesListChatModel):
        """FakeMessagesListChatModel that accepts ``bind_tools`` (the agent binds its tools to the model)."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    exporter = CollectorFileExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "peer-story-openinference-langchain"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LangChainInstrumentor().instrument(tracer_provider=provider)

    replies = [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])
               for call_id, name, args in story.CALLS]
    replies.append(AIMessage(content=story.FINAL_ANSWER))
    model = ScriptedChat(responses=replies)
    tools = [StructuredTool.from_function(fn) for fn in story.TOOLS.values()]
    agent = create_react_agent(model, tools)
    agent.invoke(
        {"messages": [("user", story.PROMPT)]},
        config={"metadata": {"session_id": story.SESSION_ID, "user_id": story.USER_ID}, "recursion_limit": 20},
    )
    provider.shutdown()


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

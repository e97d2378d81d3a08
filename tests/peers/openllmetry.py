"""OpenLLMetry (traceloop-sdk): ``@workflow``/``@agent``/``@tool`` decorators around a hand-written agent loop.

The loop's model calls go through the real ``openai`` client, instrumented by OpenLLMetry's own
OpenAI instrumentation (the only one ``Traceloop.init`` is allowed to load here), on a scripted
transport. ``Traceloop.init`` gets our exporter, so no Traceloop client, fetcher or metrics start.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import story
from .exporter import CollectorFileExporter
from .scripted_openai import chat_completions_client

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run the story under ``Traceloop.init(exporter=..., disable_batch=True)``; write ``path``."""
    os.environ["TRACELOOP_TELEMETRY"] = "false"
    os.environ["TRACELOOP_METRICS_ENABLED"] = "false"
    os.environ["TRACELOOP_LOGGING_ENABLED"] = "false"
    os.environ.pop("TRACELOOP_API_KEY", None)
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent, conversation, tool, workflow
    from traceloop.sdk.instruments import Instruments

    exporter = CollectorFileExporter(path)
    Traceloop.init(app_name="peer-story-traceloop", api_endpoint="http://traceloop.invalid", exporter=exporter,
                   disable_batch=True, telemetry_enabled=False, instruments={Instruments.OPENAI})
    Traceloop.set_association_properties({"user_id": story.USER_ID, "session_id": story.SESSION_ID})

    tools = {name: tool(name=name)(fn) for name, fn in story.TOOLS.items()}
    client = chat_completions_client()

    @agent(name="support")
    def support(prompt: str) -> str:
        return story.chat_loop(client, tools, prompt)

    @workflow(name="payments_story")
    @conversation(conversation_id=story.SESSION_ID)
    def payments_story() -> str:
        return support(story.PROMPT)

    payments_story()



if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

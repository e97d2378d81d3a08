"""Langfuse (OpenTelemetry-based SDK): ``@observe(as_type="agent"/"tool")`` and its OpenAI integration.

No Langfuse server: the client gets our exporter as its ``span_exporter`` (Langfuse's own span
processor and its transforming exporter still run in front of it) and an ``httpx`` client whose
transport refuses every request, so its background consumers cannot reach anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import story
from .exporter import CollectorFileExporter
from .scripted_openai import chat_completions_client

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run the story with ``Langfuse(span_exporter=...)``, ``@observe`` and ``langfuse.openai``; write ``path``."""
    import httpx
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    refused: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        refused.append(str(request.url))
        return httpx.Response(503)

    import langfuse.openai  # noqa: F401  (patches the openai SDK's create methods: each call becomes a generation)
    from langfuse import Langfuse, observe, propagate_attributes

    exporter = CollectorFileExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "peer-story-langfuse"}))
    client = Langfuse(public_key="pk-lf-peer-story", secret_key="sk-lf-peer-story", base_url="http://langfuse.invalid",
                      tracer_provider=provider, span_exporter=exporter, httpx_client=httpx.Client(transport=httpx.MockTransport(refuse)),
                      flush_at=1, environment="peer-story")
    openai_client = chat_completions_client()

    tools = {name: observe(name=name, as_type="tool")(fn) for name, fn in story.TOOLS.items()}

    @observe(name="support", as_type="agent")
    def support(prompt: str) -> str:
        return story.chat_loop(openai_client, tools, prompt)

    with propagate_attributes(session_id=story.SESSION_ID, user_id=story.USER_ID, trace_name="payments-story"):
        support(story.PROMPT)
    client.flush()
    client.shutdown()
    assert not refused, f"Langfuse tried the network: {refused}"


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

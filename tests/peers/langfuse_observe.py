"""Langfuse (OpenTelemetry-based SDK): ``@observe(as_type="agent"/"tool")`` and its OpenAI integration.

No Langfuse server: the client gets our exporter as its ``span_exporter`` (Langfuse's own span
processor and its transforming exporter still run in front of it) and an ``httpx`` client whose
transport refuses every request, so its background consumers cannot reach anything.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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
    schemas = [{"type": "function", "function": {"name": name, "description": fn.__doc__, "parameters": {
        "type": "object", "properties": {k: {"type": "integer" if k == "amount_cents" else "string"} for k in args},
        "required": list(args)}}} for (_, name, args), fn in
        ((next(c for c in story.CALLS if c[1] == n), story.TOOLS[n]) for n in story.TOOLS)]

    @observe(name="support", as_type="agent")
    def support(prompt: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        while True:
            reply = openai_client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=schemas).choices[0].message
            if not reply.tool_calls:
                return reply.content or ""
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                result = tools[call.function.name](**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})

    with propagate_attributes(session_id=story.SESSION_ID, user_id=story.USER_ID, trace_name="payments-story"):
        support(story.PROMPT)
    client.flush()
    client.shutdown()
    assert not refused, f"Langfuse tried the network: {refused}"


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

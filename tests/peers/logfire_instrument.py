"""logfire: ``@logfire.instrument`` tool functions inside a ``logfire.span`` agent run, model calls by ``instrument_openai``.

``logfire.configure(send_to_logfire=False, console=False, additional_span_processors=[...])``: no
token, no console, our exporter as the only destination. ``record_return=True`` is needed for the
tool's result to be recorded at all (logfire's default is ``False``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import story
from .exporter import CollectorFileExporter
from .scripted_openai import chat_completions_client

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run the story under ``logfire.configure(send_to_logfire=False)``; write ``path``."""
    import logfire
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = CollectorFileExporter(path)
    logfire.configure(send_to_logfire=False, console=False, service_name="peer-story-logfire", service_version="1.0.0",
                      additional_span_processors=[SimpleSpanProcessor(exporter)], metrics=False,
                      inspect_arguments=False)
    client = chat_completions_client()
    logfire.instrument_openai(client)

    # logfire's template names the span; the function's own name is not a parameter to interpolate.
    tools = {name: logfire.instrument(f"running tool {name}", span_name=name, record_return=True)(fn)
             for name, fn in story.TOOLS.items()}

    # Baggage becomes span attributes. logfire's default scrubber blanks ``session_id`` on its own spans
    # ("session" is one of its patterns) but not on ``logfire.openai`` spans; ``gen_ai.conversation.id``
    # is on its list of safe keys, so it survives everywhere.
    baggage = {"session_id": story.SESSION_ID, "gen_ai.conversation.id": story.SESSION_ID, "user_id": story.USER_ID}
    with logfire.set_baggage(**baggage):
        with logfire.span("support agent run {prompt}", prompt=story.PROMPT) as run:
            run.set_attribute("answer", story.chat_loop(client, tools, story.PROMPT))
    logfire.shutdown()


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))

"""OpenAI clients whose HTTP transport answers from the story's script, so a real SDK call never leaves the process.

The client, and any instrumentation wrapped around it, run their own code; only the exchange is
replaced by ``httpx.MockTransport``. One reply per request: a tool call for each of ``story.CALLS``,
then the final answer.
"""

from __future__ import annotations

import json
from typing import Any

from . import story

__all__ = ["chat_completions_client", "responses_client"]

_CREATED = 1767225600  # 2026-01-01T00:00:00Z
_API_KEY = "sk-peer-story-no-network"
_BASE_URL = "http://peer-story.invalid/v1"


def _usage(n: int) -> tuple[int, int]:
    return 50 * n, 12


def chat_completions_client(*, asynchronous: bool = False) -> Any:
    """An ``openai.OpenAI`` (or ``AsyncOpenAI``) client answering ``POST /chat/completions`` from the script."""
    import httpx
    import openai

    turn = {"n": 0}

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path.endswith("/chat/completions"), request.url
        sent = json.loads(request.content)
        n = turn["n"] = turn["n"] + 1
        if n <= len(story.CALLS):
            call_id, name, args = story.CALLS[n - 1]
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": story.FINAL_ANSWER}, "stop"
        prompt, completion = _usage(n)
        return httpx.Response(200, json={
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": _CREATED + n, "model": sent["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        })

    if asynchronous:
        return openai.AsyncOpenAI(api_key=_API_KEY, base_url=_BASE_URL, max_retries=0,
                                  http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)))
    return openai.OpenAI(api_key=_API_KEY, base_url=_BASE_URL, max_retries=0,
                         http_client=httpx.Client(transport=httpx.MockTransport(answer)))


def responses_client() -> Any:
    """An ``openai.AsyncOpenAI`` client answering ``POST /responses`` (the Responses API) from the script."""
    import httpx
    import openai

    turn = {"n": 0}

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path.endswith("/responses"), request.url
        sent = json.loads(request.content)
        n = turn["n"] = turn["n"] + 1
        if n <= len(story.CALLS):
            call_id, name, args = story.CALLS[n - 1]
            output: list[dict[str, Any]] = [{"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id,
                                             "name": name, "arguments": json.dumps(args), "status": "completed"}]
        else:
            output = [{"type": "message", "id": "msg_final", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": story.FINAL_ANSWER, "annotations": []}]}]
        prompt, completion = _usage(n)
        return httpx.Response(200, json={
            "id": f"resp_{n}", "object": "response", "created_at": _CREATED + n, "status": "completed",
            "model": sent["model"], "output": output, "parallel_tool_calls": False, "tool_choice": "auto",
            "tools": sent.get("tools", []), "temperature": 1.0, "top_p": 1.0, "error": None,
            "incomplete_details": None, "instructions": sent.get("instructions"), "metadata": {},
            "usage": {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        })

    return openai.AsyncOpenAI(api_key=_API_KEY, base_url=_BASE_URL, max_retries=0,
                              http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)))

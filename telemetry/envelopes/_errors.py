"""What an error result offers the model to act on: a code, retry advice, a recovery path.

A good error names the condition (a code the model can branch on), says whether and when to
retry, and offers a way out (another tool, the id of what already exists); a bad one hands the
model a sentence or a stack trace. :func:`error_facts` reads those facts from a result that
reported a failure, without keeping any of its content: the code only when it is a short token,
the retry-after only when it is a sane number of seconds, and for the text only whether it carries
exception text. Pure, like the rules beside it; the decorator calls it only for results that
reported a failure, so a call that succeeded pays nothing for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .. import conventions as c

__all__ = ["ErrorFacts", "error_facts", "exception_text"]

_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}|[A-Z][A-Z0-9_]{0,63}")
_UNNAMED = frozenset({c.OUTCOME_ERROR, c.OUTCOME_TOOL_ERROR})
"""Outcomes that say only that the call failed, not which condition: no code."""
_SCANNED = 4096
"""How much of one text is searched for exception text: a long message costs no more than this."""
_TRACEBACK = "Traceback (most recent call last)"
_FRAME = re.compile(r"File \"[^\"\n]{1,300}\", line \d+")
_CLASS = re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)(?::|\()")
_QUALIFIED = re.compile(r"\b[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+\.[A-Z][A-Za-z0-9_]*:")
_STACK_FRAME = re.compile(r"\bat [\w$.]+\([\w$]+\.(?:java|kt|cs|js|ts):\d+\)")
"""Exception text: a Python traceback or frame line, ``KeyError:``/``ValueError(...)``, a qualified
class name and a colon (``psycopg.errors.UniqueViolation:``), a Java or JS stack frame. Each
pattern runs only when the text holds what it needs (a plain sentence costs a few substring tests)."""
_TEXT_KEYS = (c.ENVELOPE_MESSAGE, c.ENVELOPE_ERROR, "detail", "details", "description", "error_message", "stack",
              "stacktrace", "trace")


class ErrorFacts(NamedTuple):
    """The actionable facts of one error result (no content: a token, advice, flags)."""

    code: str | None
    """The condition named, as a lower-case token; None when the result named none."""
    retry: str
    """``advised``, ``not_advised`` or ``unsaid``."""
    retry_after_seconds: float | None
    recovery: str
    """``tool``, ``existing_id`` or ``none``."""
    exception_text: bool


def _lookup(result: Any) -> Callable[[str], Any]:
    """A key reader over ``result``: a mapping's keys, an MCP result's structured content, or attributes."""
    if isinstance(result, Mapping):
        inner = result.get("structuredContent") if result.get("isError") is True else None
        if isinstance(inner, Mapping):
            found: Mapping[str, Any] = inner
            return lambda key: result.get(key, found.get(key))
        return result.get
    structured = getattr(result, "structured_content", None)
    if structured is None:
        structured = getattr(result, "structuredContent", None)
    if isinstance(structured, Mapping):
        return structured.get
    return lambda key: getattr(result, key, None)


def _code(outcome: str) -> str | None:
    if outcome in _UNNAMED or not _CODE.fullmatch(outcome):
        return None
    return outcome.lower()


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and 0.0 <= seconds <= c.MAX_RETRY_AFTER_SECONDS else None


def _texts(result: Any, get: Callable[[str], Any]) -> list[str]:
    """The texts an error result shows the model: its message keys, GraphQL messages, MCP text content."""
    found: list[str] = []
    for key in _TEXT_KEYS:
        value = get(key)
        if value is None:
            continue
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, Mapping) and isinstance(value.get(c.ENVELOPE_MESSAGE), str):
            found.append(value[c.ENVELOPE_MESSAGE])
    errors = get("errors")
    if errors and isinstance(errors, (list, tuple)):
        found.extend(e[c.ENVELOPE_MESSAGE] for e in errors[:8]
                     if isinstance(e, Mapping) and isinstance(e.get(c.ENVELOPE_MESSAGE), str))
    content = result.get("content") if type(result) is dict or isinstance(result, Mapping) \
        else getattr(result, "content", None)
    if content and isinstance(content, (list, tuple)):
        for item in content[:8]:
            text = item.get("text") if isinstance(item, Mapping) else getattr(item, "text", None)
            if isinstance(text, str):
                found.append(text)
    if isinstance(result, str):
        found.append(result)
    return found


def exception_text(text: str) -> bool:
    """True when ``text`` (its first few thousand characters) carries exception text or a stack trace."""
    head = text[:_SCANNED]
    if _TRACEBACK in head:
        return True
    if '", line ' in head and _FRAME.search(head):
        return True
    if ("Error" in head or "Exception" in head) and _CLASS.search(head):
        return True
    if ":" in head and (_QUALIFIED.search(head) or ("at " in head and _STACK_FRAME.search(head))):
        return True
    return False


def error_facts(result: Any, outcome: str) -> ErrorFacts:
    """The actionable facts of ``result``, a result the rules judged a failure with ``outcome``.

    Never raises for an odd result: a property that raises is the caller's to contain (the
    decorator counts it as its own failure and records the call without these facts).
    """
    get = _lookup(result)
    retry_flag = get(c.ENVELOPE_RETRY)
    if not isinstance(retry_flag, bool):
        retry_flag = get(c.ENVELOPE_RETRYABLE)
    after = _seconds(get(c.ENVELOPE_RETRY_AFTER_SECONDS))
    if after is None:
        after = _seconds(get(c.ENVELOPE_RETRY_AFTER))
    if isinstance(retry_flag, bool):
        retry = c.RETRY_ADVISED if retry_flag else c.RETRY_NOT_ADVISED
    else:
        retry = c.RETRY_ADVISED if after is not None else c.RETRY_UNSAID
    tool = get(c.ENVELOPE_RECOVERY_TOOL)
    existing = get(c.ENVELOPE_EXISTING_ID)
    if isinstance(tool, str) and tool:
        recovery = c.RECOVERY_TOOL
    elif (isinstance(existing, str) and existing) or (isinstance(existing, int) and not isinstance(existing, bool)):
        recovery = c.RECOVERY_EXISTING_ID
    else:
        recovery = c.RECOVERY_NONE
    leaked = any(exception_text(text) for text in _texts(result, get))
    return ErrorFacts(_code(outcome), retry, after, recovery, leaked)

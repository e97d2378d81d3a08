"""Turn what a tool returned into the triad's transport and outcome, by the rules of DESIGN.md.

Pure functions, no telemetry state: the decorator calls :func:`classify_result` once per call
that returned, and the user's ``outcome`` callable or ``current_call().set_outcome()`` may
override the result afterwards.

The rules, in order:

- an HTTP status (an attribute ``status_code`` or a mapping key ``status_code``, an int in
  100-599; other values are not HTTP statuses and are ignored) outside 2xx
  makes transport ``error`` with outcome ``rate_limited`` (429), ``not_found`` (404),
  ``rejected_stale_version`` (409, 412), ``invalid_argument`` (400, 422) or ``error``;
- an envelope ``{"ok": false, "error": CODE}`` gives outcome CODE (``error`` when CODE is absent);
- ``{"rejected": true}`` gives ``rejected_stale_version``;
- an MCP-style ``isError: true`` (mapping key, or the ``is_error``/``isError`` attribute of an
  SDK ``CallToolResult``) gives
  ``tool_error``, or the code of an ``{"ok": false, "error": CODE}`` structured result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .. import conventions as c

_STATUS_OUTCOMES = {
    400: c.OUTCOME_INVALID_ARGUMENT,
    404: c.OUTCOME_NOT_FOUND,
    409: c.OUTCOME_REJECTED_STALE_VERSION,
    412: c.OUTCOME_REJECTED_STALE_VERSION,
    422: c.OUTCOME_INVALID_ARGUMENT,
    429: c.OUTCOME_RATE_LIMITED,
}


class ResultClass(NamedTuple):
    transport: str
    outcome: str
    status_code: int | None


OK = ResultClass(c.TRANSPORT_OK, c.OUTCOME_OK, None)


def _status_of(result: Any) -> int | None:
    status = result.get("status_code") if isinstance(result, Mapping) else getattr(result, "status_code", None)
    if isinstance(status, bool) or not isinstance(status, int):
        return None
    # Only a value an HTTP response can carry counts (an IntEnum such as HTTPStatus becomes a
    # plain int); anything else (0, negative, beyond int64) is some other "status code".
    return int(status) if 100 <= status <= 599 else None


def _envelope_outcome(result: Mapping[str, Any]) -> str | None:
    if result.get("ok") is False:
        code = result.get("error")
        return code if isinstance(code, str) and code else c.OUTCOME_ERROR
    if result.get("rejected") is True:
        return c.OUTCOME_REJECTED_STALE_VERSION
    return None


def _is_error(result: Any) -> bool:
    if isinstance(result, Mapping):
        return result.get("isError") is True
    # The wire name is isError; the mcp 2.x SDK's CallToolResult spells the attribute is_error.
    return getattr(result, "is_error", None) is True or getattr(result, "isError", None) is True


def _structured(result: Any) -> Any:
    if isinstance(result, Mapping):
        return result.get("structuredContent")
    found = getattr(result, "structured_content", None)
    return found if found is not None else getattr(result, "structuredContent", None)


def classify_result(result: Any) -> ResultClass:
    """Classify a returned value; most results (plain values) are simply ``OK``."""
    if result is None or isinstance(result, (str, int, float, bytes, list, tuple)):
        return OK
    status = _status_of(result)
    if status is not None and not 200 <= status < 300:
        return ResultClass(c.TRANSPORT_ERROR, _STATUS_OUTCOMES.get(status, c.OUTCOME_ERROR), status)
    if isinstance(result, Mapping):
        envelope = _envelope_outcome(result)
        if envelope is not None:
            return ResultClass(c.TRANSPORT_OK, envelope, status)
    if _is_error(result):
        structured = _structured(result)
        code = _envelope_outcome(structured) if isinstance(structured, Mapping) else None
        return ResultClass(c.TRANSPORT_OK, code or c.OUTCOME_TOOL_ERROR, status)
    if status is not None:
        return ResultClass(c.TRANSPORT_OK, c.OUTCOME_OK, status)
    return OK


def error_type_of(exc: BaseException) -> str:
    """The ``error.type`` of an exception: its fully qualified class name."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


def readback_value(value: Any) -> str:
    """Normalise what a read-back callable returned to a ``tool.readback`` value.

    ``True``/``False`` mean match/mismatch, ``None`` means the read-back was skipped, and one
    of the ``tool.readback`` strings is taken as is.
    """
    if value is True:
        return c.READBACK_MATCH
    if value is False:
        return c.READBACK_MISMATCH
    if value is None:
        return c.READBACK_SKIPPED
    text = getattr(value, "value", value)
    if isinstance(text, str) and text in c.READBACK_VALUES:
        return text
    raise ValueError(
        f"a read-back returned {value!r}; return True (match), False (mismatch), None (skipped) "
        f"or a telemetry.Readback value"
    )

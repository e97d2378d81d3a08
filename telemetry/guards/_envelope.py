"""The one shape every guard refusal takes, so a model can act on any of them the same way.

``{"ok": false, "error": CODE, "message": ..., "retry": bool, "retry_after_seconds"?, ...context}``
where CODE is an outcome code from ``telemetry.conventions``, ``message`` says what happened and
what to do next, ``retry`` says whether redoing the call (after doing what the message says) can
succeed, and the context carries what the caller needs to redo the work (the current value and
version, the current policy, the missing constraint ids, ...; ``recovery_tool`` names another tool
to call, ``existing_id`` the object that already exists). The decorator's classifier reads
``ok``/``error`` from it, so the refusal lands on the span and in the counters by itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .. import conventions as c
from ._store import StoreBusy

__all__ = ["busy_refusal", "refusal", "refuse_when_busy", "success"]

F = TypeVar("F", bound=Callable[..., Any])

def refusal(
    code: str,
    message: str,
    *,
    retry: bool,
    retry_after_seconds: float | None = None,
    **context: Any,
) -> dict[str, Any]:
    """Build a refusal envelope; raises ``ValueError`` for a code outside the vocabulary."""
    if code not in c.OUTCOMES or code == c.OUTCOME_OK:
        raise ValueError(f"refusal code {code!r} is not a non-ok outcome code from telemetry.conventions")
    if not message:
        raise ValueError("a refusal needs a message that says what happened and what to do")
    clash = c.ENVELOPE_KEYS.intersection(context)
    if clash:
        raise ValueError(f"context keys {sorted(clash)} are reserved by the envelope")
    envelope: dict[str, Any] = {
        c.ENVELOPE_OK: False,
        c.ENVELOPE_ERROR: code,
        c.ENVELOPE_MESSAGE: message,
        c.ENVELOPE_RETRY: retry,
    }
    if retry_after_seconds is not None:
        envelope[c.ENVELOPE_RETRY_AFTER_SECONDS] = retry_after_seconds
    envelope.update(context)
    return envelope


def success(**fields: Any) -> dict[str, Any]:
    """The matching success shape: ``{"ok": true, ...fields}``."""
    if c.ENVELOPE_OK in fields or c.ENVELOPE_ERROR in fields:
        raise ValueError(f"success fields may not be named {c.ENVELOPE_OK!r} or {c.ENVELOPE_ERROR!r}")
    return {c.ENVELOPE_OK: True, **fields}


def refuse_when_busy(func: F) -> F:
    """Turn :class:`~telemetry.guards._store.StoreBusy` into a retryable ``rate_limited`` refusal.

    A guard tool whose store stayed locked past the busy timeout wrote nothing; a model acts
    better on "wait and retry" in the usual envelope than on an exception. Put it directly
    under ``@instrument_tool`` so the refusal lands on the span and in the counters.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except StoreBusy as busy:
            return busy_refusal(busy)

    return wrapper  # type: ignore[return-value]


def busy_refusal(busy: StoreBusy) -> dict[str, Any]:
    """The ``rate_limited`` refusal for a store that stayed locked, lost a conflict or lost its
    connection: nothing written, retry soon."""
    return refusal(
        c.OUTCOME_RATE_LIMITED,
        f"{busy}. Wait {busy.retry_after_seconds:g} s and send the same call again.",
        retry=True,
        retry_after_seconds=busy.retry_after_seconds,
    )

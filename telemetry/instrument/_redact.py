"""Which argument names hold secrets, judged by the name's words, not its spelling.

``X-Api-Key``, ``x_api_key``, ``xApiKey`` and ``XAPIKEY`` are one name to a reader, so they are
one name here: a name is *folded* (lower-cased, every character that is not a letter or a
digit dropped, which also folds camelCase) and is secret when the folded form contains one of
:data:`telemetry.conventions.SECRET_NAME_PARTS` (``apikey``, ``privatekey``, ``token``,
``authorization``, ``cookie``, ``password``, ``secret``, ...), or when one of its words (split
at separators and at camelCase humps) is one of :data:`telemetry.conventions.SECRET_NAME_WORDS`
(short words such as ``auth`` that would match too much inside other words).

A wrong "secret" costs a redacted value nobody needed; a missed one leaks a credential onto
every span, so the parts err towards redacting (``max_tokens`` is redacted too).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from .. import conventions as c

__all__ = ["fold", "is_secret_name", "redact"]

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORDS = frozenset(c.SECRET_NAME_WORDS)


def fold(name: str) -> str:
    """``name`` lower-cased with every non-alphanumeric character dropped: ``X-Api-Key`` -> ``xapikey``."""
    return _NOT_ALNUM.sub("", name.lower())


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when an argument or key called ``name`` must be recorded as ``[REDACTED]``."""
    folded = fold(name)
    if any(part in folded for part in c.SECRET_NAME_PARTS):
        return True
    words = _NOT_ALNUM.split(_HUMP.sub(" ", name).lower())
    return any(word in _WORDS for word in words)


def redact(value: Any, depth: int = 0) -> Any:
    """``value`` with every mapping entry under a secret name replaced by ``[REDACTED]``, through
    nested mappings, lists, tuples and sets. Raises ValueError for a value nested deeper than 32
    levels (a cycle, say), which the recorder then names instead of rendering."""
    if depth > 32:
        raise ValueError("nested deeper than 32 levels")
    if isinstance(value, Mapping):
        return {
            k: (c.REDACTED if isinstance(k, str) and is_secret_name(k) else redact(v, depth + 1)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [redact(v, depth + 1) for v in value]
    return value

"""A tool's kind read from its name and its parameter names, when nothing declares it.

One set of word rules for the two readers that meet undeclared tools: the audit (a Python tool or
an MCP tool with no ``kind=``) and forensics (a tool span another instrumentation wrote, which
never carries ``tool.kind``). It sits below both, like :mod:`telemetry._span_formats`: it imports
only :mod:`telemetry.conventions`.

- :func:`kind_from_name` says read, send or delegate when the name says so (the audit's rules),
  and write when its verbs create, change or delete something; None when the name decides nothing
  (``refund``, ``process``). The audit then takes the tool to write, as the decorator does
  (:func:`telemetry.audit._infer.infer_kind`); forensics leaves the kind undecided.
- :func:`kind_from_parameters` says write when a parameter carries the version a write was built
  on (``expected_version``, ``etag``, ...), send when one names the policy version.
- :func:`is_key_parameter` tells an idempotency key (``idempotency_key``, ``request_id``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from . import conventions as c

__all__ = [
    "CREATE_PREFIXES",
    "DELEGATE_WORDS",
    "DELETE_WORDS",
    "KEY_NAMES",
    "OVERWRITE_WORDS",
    "POLICY_VERSION",
    "READ_PREFIXES",
    "SEND_WORDS",
    "VERSION_NAMES",
    "is_key_parameter",
    "is_version_parameter",
    "kind_from_name",
    "kind_from_parameters",
    "name_says",
    "words",
]

READ_PREFIXES: Final = (
    "get", "read", "list", "search", "find", "fetch", "query", "describe", "lookup", "show", "count",
    "plan", "preview", "check", "inspect", "view", "peek", "estimate", "validate",
)
SEND_WORDS: Final = ("send", "notify", "email", "sms", "message", "post", "publish_message", "broadcast", "reply")
DELEGATE_WORDS: Final = ("delegate", "handoff", "hand_off", "assign_task", "dispatch_task", "spawn")
CREATE_PREFIXES: Final = ("create", "publish", "register", "add", "insert", "charge", "submit", "enqueue", "schedule", "book")
"""A write whose name starts so is taken as create-only (it makes a new object, a charge, a booking):
there is no earlier read for it to be stale against."""
OVERWRITE_WORDS: Final = ("update", "set", "edit", "modify", "patch", "replace", "put", "write", "change", "save", "upsert")
DELETE_WORDS: Final = ("delete", "remove", "drop", "purge", "wipe", "truncate", "destroy", "reset", "erase")
VERSION_NAMES: Final = ("expected_version", "version", "etag", "if_match", "base_version", "expected_revision", "revision")
KEY_NAMES: Final = ("idempotency_key", "request_id", "dedup_key", "deduplication_key", "client_token", "operation_id")
POLICY_VERSION: Final = "policy_version"


def words(name: str) -> list[str]:
    """``writeState``/``write_state``/``write-state`` as ``["write", "state"]``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if w]


def name_says(name: str) -> str | None:
    """Read, send or delegate when the name says so (the audit's rules, in its order), else None."""
    parts = words(name)
    joined = "_".join(parts)
    if any(w in parts for w in ("delegate", "handoff")) or any(w in joined for w in DELEGATE_WORDS[2:]):
        return c.KIND_DELEGATE
    if any(w in parts for w in SEND_WORDS):
        return c.KIND_SEND
    if parts and parts[0] in READ_PREFIXES:
        return c.KIND_READ
    return None


def kind_from_name(name: str) -> str | None:
    """The kind the name decides: :func:`name_says`, else write when a verb of the name creates,
    changes or deletes (``charge_card``, ``update_email``, ``delete_user``); None otherwise."""
    said = name_says(name)
    if said is not None:
        return said
    parts = words(name)
    if any(w in CREATE_PREFIXES or w in OVERWRITE_WORDS or w in DELETE_WORDS for w in parts):
        return c.KIND_WRITE
    return None


def is_version_parameter(name: str) -> bool:
    """A parameter that carries the version a write was built on."""
    lowered = name.lower()
    return lowered in VERSION_NAMES or lowered.endswith("_version")


def is_key_parameter(name: str) -> bool:
    """A parameter named like an idempotency key."""
    lowered = name.lower()
    return lowered in KEY_NAMES or lowered.endswith("idempotency_key")


def kind_from_parameters(names: Iterable[str]) -> str | None:
    """Send when a parameter names the policy version, write when one carries a version; else None."""
    lowered = [n.lower() for n in names]
    if POLICY_VERSION in lowered:
        return c.KIND_SEND
    if any(is_version_parameter(n) for n in lowered):
        return c.KIND_WRITE
    return None

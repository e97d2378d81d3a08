"""The toolkit's exceptions: one base class, each subclass says what went wrong and what to do.

Telemetry itself never raises into a tool call; these are raised by configuration, by the
guards' operator-facing APIs and by forensics, where the caller asked for something that
cannot be done.
"""

from __future__ import annotations

__all__ = [
    "AuditTargetError",
    "ClickHouseAuthError",
    "ClickHouseBadRows",
    "ClickHouseInputError",
    "ClickHouseSchemaError",
    "ClickHouseTableMissing",
    "ClickHouseUnreachable",
    "ConfigurationError",
    "ForensicsInputError",
    "GuardError",
    "TelemetryError",
    "TooManySpans",
    "WatchStateError",
]


class TelemetryError(Exception):
    """Base class of every exception this package raises on purpose."""


class ConfigurationError(TelemetryError, ValueError):
    """``configure()`` or a decorator was given something it cannot use; the message says
    which value and what to pass instead."""


class ForensicsInputError(TelemetryError, ValueError):
    """A trace file is not OTLP JSON (or is malformed); the message names the file and line."""


class GuardError(TelemetryError):
    """A guard's operator-facing API was misused (for example a forced write without an
    operator identity). Tool-facing refusals are envelopes, never exceptions."""


class AuditTargetError(TelemetryError, ValueError):
    """An audit target cannot be loaded (no such module or attribute, not a tool, an MCP server
    that does not start or answer); the message names the target and what to pass instead."""


class WatchStateError(TelemetryError, ValueError):
    """The ``watch --state`` file cannot be used (not JSON, another format, or unreadable); the
    message names the file and says how to start afresh."""


class ClickHouseInputError(ForensicsInputError):
    """Forensics could not read spans from ClickHouse: a bad URL or option, or one of the failures
    below. Messages never contain the password."""


class ClickHouseUnreachable(ClickHouseInputError):
    """No ClickHouse server answered at the URL (refused, unresolvable, TLS failure or a timeout)."""


class ClickHouseAuthError(ClickHouseInputError):
    """The server refused the user or password (or the user may not read the table)."""


class ClickHouseTableMissing(ClickHouseInputError):
    """The database or table named does not exist (or is not visible to the user)."""


class ClickHouseSchemaError(ClickHouseInputError):
    """The table is not shaped like the Collector's ``otel_traces``; the message names the column."""


class TooManySpans(ClickHouseInputError):
    """The window selects more spans than ``--max-spans`` allows; narrow it or raise the limit."""


class ClickHouseBadRows(ClickHouseInputError):
    """Rows break the OTLP id or time rules (ids not 32/16 hex, a time outside [0, 2^63 - 1), an end
    before its start); the message names their trace and span ids. ``skip_bad_rows`` (the CLI's
    ``--skip-bad-lines``) skips them instead, as bad lines of a file are skipped."""

"""The ClickHouse command-line options, one definition for ``forensics`` and ``watch``."""

from __future__ import annotations

import argparse
import logging

from ...exceptions import ClickHouseInputError
from ._client import PASSWORD_ENV
from ._source import DEFAULT_MAX_SPANS, DEFAULT_TABLE
from ._window import DEFAULT_LAST

__all__ = ["add_arguments", "quiet_driver_logs", "refuse_without_clickhouse"]


def add_arguments(parser: argparse.ArgumentParser, *, window: bool = True) -> None:
    """Add ``--clickhouse URL`` and the options that go with it. ``window``: also ``--since``,
    ``--until`` and ``--last`` (``watch`` has its own ``--last``, for files too, and no fixed ends:
    its window slides with every pass)."""
    group = parser.add_argument_group(
        "ClickHouse (instead of PATHS)",
        "Read the runs (conversation ids, else trace ids) with tool spans in a time window from the "
        "table the OpenTelemetry Collector's clickhouseexporter writes; each run is read whole, with "
        "the spans that parent its tool spans.")
    group.add_argument("--clickhouse", metavar="URL",
                       help="http(s)://USER@HOST:PORT/DATABASE (https for TLS; ?verify=0, ?ca_cert=PATH, "
                            "?connect_timeout=S, ?query_timeout=S and ClickHouse settings in the query "
                            "string), or chdb:///PATH for chDB in process")
    group.add_argument("--table", default=DEFAULT_TABLE, metavar="[DB.]TABLE",
                       help=f"the spans table (default {DEFAULT_TABLE}, in the URL's database)")
    if window:
        group.add_argument("--since", metavar="TIME", help="window start, ISO 8601 (UTC unless an offset is given)")
        group.add_argument("--until", metavar="TIME", help="window end (default now)")
        group.add_argument("--last", metavar="DURATION", help=f"window of the last DURATION, e.g. 30m, 6h, 2d "
                                                                f"(default {DEFAULT_LAST})")
    group.add_argument("--service", metavar="NAME", help="only runs in which service NAME has a tool span")
    group.add_argument("--max-spans", type=int, default=DEFAULT_MAX_SPANS, metavar="N",
                       help=f"refuse to read more than N spans (default {DEFAULT_MAX_SPANS:,})")
    group.add_argument("--password-env", default=PASSWORD_ENV, metavar="VAR",
                       help=f"environment variable holding the password (default {PASSWORD_ENV})")


def quiet_driver_logs() -> None:
    """Stop clickhouse-connect's own log records at a handler that drops them.

    The driver logs each failed request itself ("Unexpected Http Driver Exception", a warning that
    reaches stderr through Python's last-resort handler when nothing configured logging), and then
    raises; the command names that failure in one line of its own. Only the commands call this, for
    their own process: a program using the library keeps its logging as it configured it."""
    driver = logging.getLogger("clickhouse_connect")
    if not any(type(handler) is logging.NullHandler for handler in driver.handlers):
        driver.addHandler(logging.NullHandler())


_ONLY_CLICKHOUSE = (("service", "--service", None), ("table", "--table", DEFAULT_TABLE),
                    ("max_spans", "--max-spans", DEFAULT_MAX_SPANS), ("password_env", "--password-env", PASSWORD_ENV))
"""The options only a ClickHouse read uses, the window's aside: (argument, flag, value when not given)."""
_WINDOW = (("since", "--since", None), ("until", "--until", None), ("last", "--last", None))


def refuse_without_clickhouse(args: argparse.Namespace, *, window: bool = True) -> None:
    """Refuse, naming it, an option given with trace PATHS that only a ClickHouse read uses.

    With trace files ``--since``, ``--service`` or ``--table`` would be silently ignored, and a
    report would answer for spans the user meant to leave out. ``window`` as for
    :func:`add_arguments` (``watch``'s ``--last`` is its own and applies to files too)."""
    for dest, flag, default in _ONLY_CLICKHOUSE + (_WINDOW if window else ()):
        if getattr(args, dest) != default:
            raise ClickHouseInputError(
                f"{flag} applies to --clickhouse only: with trace PATHS it would be ignored; leave it out, "
                "or read the table with --clickhouse URL")

"""Offline trace forensics: DuckDB over OTLP JSON-lines traces (ours, a Collector's, or another
instrumentation's: docs/peer-traces.md).

``open_traces(paths)`` loads files into the normalized ``spans`` relation
(``queries/spans.sql``); each question in ``queries/`` is one SQL file; ``ingest`` converts to
Parquet once for scale; ``cli.main`` is ``outcome-telemetry forensics``. Every row carries a
verdict (happened, prevented, unknown): ``tally`` counts them, ``headline`` says them in a
sentence, ``row_severity`` is a row's severity. See docs/forensics.md.
"""

from __future__ import annotations

from .._extras import require

require("duckdb", extra="forensics", needed_for="telemetry.forensics")  # fail early, with the fix in the message

from ._api import Forensics, open_clickhouse, open_traces  # noqa: E402
from ._ingest import IngestResult, ingest  # noqa: E402
from ._peers import ToolSpanSelector  # noqa: E402
from ._questions import QUESTION_NAMES, Question, all_questions, question  # noqa: E402
from ._report import Report, Section, format_rows  # noqa: E402
from ._verdicts import headline, row_severity, tally  # noqa: E402

__all__ = [
    "QUESTION_NAMES",
    "Forensics",
    "IngestResult",
    "Question",
    "Report",
    "Section",
    "ToolSpanSelector",
    "all_questions",
    "format_rows",
    "headline",
    "ingest",
    "open_clickhouse",
    "open_traces",
    "question",
    "row_severity",
    "tally",
]

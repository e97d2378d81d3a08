"""Envelope recognition: what a tool's result says about itself, live or recorded.

One set of rules serves the decorator (a live return value) and the readers of traces
(forensics over recorded results, ``observe_tool_spans`` on spans other instrumentations end), so
``{"success": false, "error": "quota_exceeded"}`` is the same failure wherever it is met. It
sits below both: it imports only :mod:`telemetry.conventions` and :mod:`telemetry.exceptions`.

- :func:`result_class` judges a value: the team's shapes (:func:`register_result_shape`) first,
  then the built-in rules (docs/envelopes.md lists them).
- :func:`error_facts` reads what an error result offers the model: a code, retry advice, a
  recovery path, and whether it leaked exception text.
- :func:`read_recorded` judges the text a tracer recorded for a result, unwrapping the frameworks'
  message wrappers first; :class:`RecordedVerdicts` does the same, remembering the verdicts of
  short texts (a live reader meets the same few results again and again).
"""

from ._classify import Report, registered_result_class, result_class
from ._errors import ErrorFacts, error_facts, exception_text
from ._recorded import (
    RECORDED_ABSENT,
    RECORDED_JUDGED,
    RECORDED_TEXT,
    RECORDED_TOO_LARGE,
    Recorded,
    read_recorded,
    unwrap_recorded,
)
from ._remembered import RecordedVerdicts
from ._rules import OK, ResultClass, builtin_result_class
from ._shapes import ShapeClassifier, register_result_shape

__all__ = [
    "OK",
    "ErrorFacts",
    "RECORDED_ABSENT",
    "RECORDED_JUDGED",
    "RECORDED_TEXT",
    "RECORDED_TOO_LARGE",
    "Recorded",
    "RecordedVerdicts",
    "Report",
    "ResultClass",
    "ShapeClassifier",
    "builtin_result_class",
    "error_facts",
    "exception_text",
    "read_recorded",
    "register_result_shape",
    "registered_result_class",
    "result_class",
    "unwrap_recorded",
]

"""Turn what a tool returned into the triad's transport and outcome.

Pure functions over the result, plus the team's registered shapes (:func:`telemetry.register_result_shape`): the
recorder calls the tool's classifier (chosen once, at decoration time, by
:func:`classifier_for`) once per call that returned, and the user's ``outcome`` callable or
``current_call().set_outcome()`` may override the result afterwards.

The contract with the recorder: the :class:`ResultClass` says what the result *itself* reported.
An outcome other than ``ok`` here means the caller was told the call failed (a refusal or an
error it can read); an ``ok`` here that the read-back, the ``outcome`` callable or
``set_outcome`` later turns into a failure is a failure the result did not admit (silent).
:attr:`ResultClass.reported_failure` names that distinction.

The rules themselves live in :mod:`telemetry.envelopes`, below both this module and forensics,
so a recorded result in a trace file meets the same rules a live one does here. This module adds
what only the per-call path needs: the classifier chosen once per tool at decoration time, a
registered shape that raises counted as the toolkit's own failure, the ``error.type`` of an
exception, and the read-back value.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from .. import conventions as c
from .. import envelopes
from ..envelopes import OK, ResultClass
from ..runtime import _containment as _safe

__all__ = ["OK", "ResultClass", "classifier_for", "classify_registered_only", "classify_result",
           "error_type_of", "readback_value"]

_SCALAR_ANNOTATIONS = frozenset({str, int, float, bool, bytes, None, type(None), "str", "int", "float", "bool", "bytes", "None"})


def _report(exc: BaseException) -> None:
    _safe.report(c.STAGE_CLASSIFIER, "a registered result shape", exc)


_registered = functools.partial(envelopes.registered_result_class, report=_report)

classify_result: Callable[[Any], ResultClass] = functools.partial(envelopes.result_class, report=_report)
"""Classify a returned value: registered shapes first, then the built-in rules."""


def classify_registered_only(result: Any) -> ResultClass:
    """For a tool whose return annotation is a plain scalar: only registered shapes can apply."""
    return _registered(result) or OK


def classifier_for(return_annotation: Any) -> Callable[[Any], ResultClass]:
    """The classifier for a tool, decided once from its return annotation.

    A tool annotated ``-> str``, ``-> int``, ``-> float``, ``-> bool``, ``-> bytes`` or
    ``-> None`` cannot return an envelope, so its calls skip the built-in checks (registered
    shapes still apply). The annotation is taken at its word: a ``-> str`` tool that returns a
    dict is not checked. Anything else (no annotation, ``dict``, a class, a union) gets every rule.
    """
    if return_annotation is inspect.Signature.empty:
        return classify_result
    try:
        scalar = return_annotation in _SCALAR_ANNOTATIONS
    except TypeError:  # an unhashable annotation object
        return classify_result
    return classify_registered_only if scalar else classify_result


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

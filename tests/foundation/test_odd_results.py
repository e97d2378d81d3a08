"""Odd results and odd exceptions: the span still ends, the call is still counted, nothing raises."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import telemetry
from telemetry import conventions as c
from telemetry.testing import Capture


class RaisingGetMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("get exploded")


class RaisingGetattr:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} for you")


class RaisingStatus:
    @property
    def status_code(self) -> int:
        raise RuntimeError("status exploded")


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str exploded")


@telemetry.instrument_tool
def echo(value: Any) -> Any:
    """Returns what it was given."""
    return value


@pytest.mark.parametrize("result", [RaisingGetMapping(), RaisingGetattr(), RaisingStatus()], ids=type)
def test_unreadable_result_still_ends_the_span(result: Any, telemetry_capture: Capture) -> None:
    """A result whose .get, __getattr__ or status_code raises: same object back, span ended and counted."""
    assert echo(result) is result
    span = telemetry_capture.span("echo")
    assert span.end_time is not None
    assert span.attributes is not None and span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    assert telemetry_capture.calls("echo") == 1


def test_exception_whose_str_raises_is_recorded(telemetry_capture: Capture) -> None:
    """An exception whose __str__ raises is re-raised as is, and its span still ends as an error."""
    error = UnprintableError()

    @telemetry.instrument_tool
    def fails() -> None:
        raise error

    with pytest.raises(UnprintableError) as caught:
        fails()
    assert caught.value is error
    span = telemetry_capture.span("fails")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes[c.ERROR_TYPE].endswith("UnprintableError")
    assert telemetry_capture.calls("fails", transport=c.TRANSPORT_ERROR) == 1


@pytest.mark.parametrize("code", [123, None, ""])
def test_non_string_outcome_from_inside_the_tool(code: Any, telemetry_capture: Capture) -> None:
    """set_outcome() with a non-string or empty value still ends and counts the span (as other)."""

    @telemetry.instrument_tool
    def odd() -> str:
        telemetry.current_call().set_outcome(code)
        return "done"

    assert odd() == "done"
    span = telemetry_capture.span("odd")
    assert span.end_time is not None
    assert telemetry_capture.calls("odd") == 1


def test_outcome_classifier_returning_an_unprintable_value(telemetry_capture: Capture) -> None:
    """An outcome classifier returning an object whose __str__ raises keeps the derived outcome."""

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    @telemetry.instrument_tool(outcome=lambda call, result: Unprintable())
    def tool() -> int:
        return 1

    assert tool() == 1
    span = telemetry_capture.span("tool")
    assert span.attributes is not None and span.attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert telemetry_capture.calls("tool", outcome=c.OUTCOME_OK) == 1


@pytest.mark.parametrize("status", [10**30, -1, 0, 1000])
def test_status_outside_http_range_is_not_an_http_status(status: int, telemetry_capture: Capture) -> None:
    """A status_code that no HTTP response carries (huge, negative) is not recorded as one."""
    assert echo({"status_code": status}) == {"status_code": status}
    span = telemetry_capture.span("echo")
    assert span.attributes is not None
    assert c.HTTP_RESPONSE_STATUS_CODE not in span.attributes
    assert span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK


def test_huge_int_argument_is_recorded_as_text(telemetry_capture: Capture) -> None:
    """A recorded int argument beyond int64 (which OTLP cannot carry) goes on the span as text."""

    @telemetry.instrument_tool(record_arguments=["n", "m"])
    def count(n: int, m: int) -> None:
        return None

    count(10**30, 7)
    attributes = telemetry_capture.span("count").attributes
    assert attributes is not None
    assert attributes[c.TOOL_ARGUMENT_PREFIX + "n"] == str(10**30)
    assert attributes[c.TOOL_ARGUMENT_PREFIX + "m"] == 7


def test_readback_returning_an_unreadable_object(telemetry_capture: Capture) -> None:
    """A read-back returning an object whose attributes raise gives readback error, result untouched."""

    @telemetry.instrument_tool(kind="write", readback=lambda call, result: RaisingGetattr())
    def write() -> str:
        return "written"

    assert write() == "written"
    attributes = telemetry_capture.span("write").attributes
    assert attributes is not None and attributes[c.TOOL_READBACK] == c.READBACK_ERROR


def test_enormous_int_argument_does_not_lose_the_others(telemetry_capture: Capture) -> None:
    """An int too long to print in decimal is summarised; the other recorded arguments stay."""

    @telemetry.instrument_tool(record_arguments=["n", "m"])
    def count(n: int, m: int) -> None:
        return None

    count(10**5000, 7)
    attributes = telemetry_capture.span("count").attributes
    assert attributes is not None
    assert attributes[c.TOOL_ARGUMENT_PREFIX + "m"] == 7
    assert "bits" in str(attributes[c.TOOL_ARGUMENT_PREFIX + "n"])

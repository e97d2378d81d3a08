"""A read-back that hangs never holds the tool's caller past the tool's readback_timeout.

For each of the four function kinds (sync, async, generator, async generator): the result goes
back unchanged at the timeout, the call is recorded with ``tool.readback=error`` and
``tool.readback.error=timeout`` and counted as an internal error of the read-back stage, nothing
is raised into the caller; a read-back that answers in time still decides match or mismatch, in
the call's context (``current_call()`` is the call). ``math.inf`` runs it in the tool's own thread.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import telemetry
from telemetry import ConfigurationError
from telemetry import conventions as c
from telemetry.testing import Capture

TIMEOUT = 0.2
"""Seconds: short so the test is cheap; the hung read-back is released at the end of each test."""


@pytest.fixture
def hang() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


def _kinds(readback: Callable[..., Any], **options: Any) -> dict[str, Callable[[], Any]]:
    """The same write as each of the four function kinds, each returning (or yielding) its own result."""

    @telemetry.instrument_tool(name="sync_write", kind="write", readback=readback, **options)
    def sync_write() -> dict[str, Any]:
        return {"ok": True, "from": "sync"}

    @telemetry.instrument_tool(name="async_write", kind="write", readback=readback, **options)
    async def async_write() -> dict[str, Any]:
        return {"ok": True, "from": "async"}

    @telemetry.instrument_tool(name="gen_write", kind="write", readback=readback, **options)
    def gen_write() -> Iterator[int]:
        yield 1
        yield 2

    @telemetry.instrument_tool(name="agen_write", kind="write", readback=readback, **options)
    async def agen_write() -> AsyncIterator[int]:
        yield 1
        yield 2

    async def collect() -> list[int]:
        return [item async for item in agen_write()]

    return {"sync_write": sync_write, "async_write": lambda: asyncio.run(async_write()),
            "gen_write": lambda: list(gen_write()), "agen_write": lambda: asyncio.run(collect())}


EXPECTED = {"sync_write": {"ok": True, "from": "sync"}, "async_write": {"ok": True, "from": "async"},
            "gen_write": [1, 2], "agen_write": [1, 2]}


def test_a_hung_readback_is_an_error_at_the_timeout_for_every_function_kind(
        telemetry_capture: Capture, hang: threading.Event) -> None:
    def stuck(call: telemetry.Call, result: Any) -> bool:
        hang.wait(60)
        return True

    for name, call in _kinds(stuck, readback_timeout=TIMEOUT).items():
        started = time.monotonic()
        assert call() == EXPECTED[name]
        assert time.monotonic() - started < 30  # the timeout, not the read-back's 60 s
        attributes = telemetry_capture.span(name).attributes
        assert attributes[c.TOOL_READBACK] == c.READBACK_ERROR, name
        assert attributes[c.TOOL_READBACK_ERROR] == c.READBACK_ERROR_TIMEOUT, name
        assert attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK and attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
        assert telemetry_capture.calls(name, readback=c.READBACK_ERROR) == 1
    stage = {c.LABEL_STAGE: c.STAGE_READBACK}
    assert telemetry_capture.sample(c.METRIC_INTERNAL_ERRORS_TOTAL, stage) == 4


def test_a_readback_in_time_decides_in_the_calls_context(telemetry_capture: Capture) -> None:
    seen: list[bool] = []

    def check(call: telemetry.Call, result: Any) -> bool:
        seen.append(telemetry.current_call() is call)
        return call.spec.name != "gen_write"  # one mismatch, three matches

    for name, call in _kinds(check).items():
        assert call() == EXPECTED[name]
        attributes = telemetry_capture.span(name).attributes
        assert attributes[c.TOOL_READBACK] == (c.READBACK_MISMATCH if name == "gen_write" else c.READBACK_MATCH)
        assert c.TOOL_READBACK_ERROR not in attributes
    assert seen == [True] * 4


def test_a_raising_readback_says_so_and_inf_runs_in_the_tools_thread(telemetry_capture: Capture) -> None:
    threads: list[int] = []

    def broken(call: telemetry.Call, result: Any) -> bool:
        threads.append(threading.get_ident())
        raise RuntimeError("the source of truth is down")

    for name, call in _kinds(broken, readback_timeout=math.inf).items():
        assert call() == EXPECTED[name]
        attributes = telemetry_capture.span(name).attributes
        assert (attributes[c.TOOL_READBACK], attributes[c.TOOL_READBACK_ERROR]) == (c.READBACK_ERROR,
                                                                                      c.READBACK_ERROR_RAISED)
    assert threads == [threading.get_ident()] * 4  # asyncio.run runs the loop in this thread too


def test_ctrl_c_in_a_readback_still_reaches_the_caller(telemetry_capture: Capture) -> None:
    """A BaseException the read-back raises on its thread is re-raised to the caller, once the
    call is recorded, as it was when read-backs ran in the tool's thread."""
    def interrupted(call: telemetry.Call, result: Any) -> bool:
        raise KeyboardInterrupt

    call = _kinds(interrupted)["sync_write"]
    with pytest.raises(KeyboardInterrupt):
        call()
    assert telemetry_capture.calls("sync_write", readback=c.READBACK_ERROR) == 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "5", True])
def test_a_bad_readback_timeout_is_refused_at_decoration(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="readback_timeout must be a number of seconds above 0"):
        telemetry.instrument_tool(kind="write", readback=lambda call, result: True, readback_timeout=bad)(lambda: None)
    with pytest.raises(ConfigurationError, match="without a readback bounds nothing"):
        telemetry.instrument_tool(kind="write", readback_timeout=1.0)(lambda: None)

"""Generator lifecycles the caller does not drive: event-loop finalization, closing before the start."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import StatusCode

import telemetry
from telemetry import conventions as c
from telemetry.instrument import NO_CALL
from telemetry.testing import Capture


def _abandon_at_loop_shutdown() -> tuple[list[Any], list[Any]]:
    """Run an async generator tool that is abandoned mid-iteration and closed by asyncio.run()."""
    done: list[Any] = []
    loop_errors: list[Any] = []

    @telemetry.instrument_tool(kind="read")
    async def stream() -> AsyncIterator[int]:
        try:
            for i in range(5):
                yield i
        finally:
            await asyncio.sleep(0)  # an async clean-up, like closing a connection
            done.append("cleaned up")

    kept: list[Any] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: loop_errors.append(ctx))
        gen = stream()
        kept.append(gen)  # still referenced when the loop shuts its async generators down
        async for _ in gen:
            break

    asyncio.run(main())
    return done, loop_errors


def test_async_generator_closed_by_loop_shutdown(telemetry_capture: Capture) -> None:
    """asyncio.run() closing an abandoned async-generator tool: clean-up runs, no loop error, span ok."""
    done, loop_errors = _abandon_at_loop_shutdown()
    assert done == ["cleaned up"]
    assert loop_errors == []
    span = telemetry_capture.span("stream")
    assert span.status.status_code is not StatusCode.ERROR
    assert span.attributes is not None and span.attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK


def test_async_generator_closed_by_loop_shutdown_undecorated_baseline() -> None:
    """The same run without telemetry configured behaves the same (the baseline of the test above)."""
    done, loop_errors = _abandon_at_loop_shutdown()
    assert done == ["cleaned up"]
    assert loop_errors == []


def test_generator_closed_before_first_next_opens_no_span(telemetry_capture: Capture) -> None:
    """A generator tool closed before it started runs nothing, records nothing, leaks no context."""
    ran: list[str] = []

    @telemetry.instrument_tool(kind="read")
    def items() -> Iterator[int]:
        ran.append("body")
        yield 1

    gen = items()
    gen.close()
    assert ran == []
    assert telemetry_capture.spans() == []
    assert telemetry.current_call() is NO_CALL
    assert not trace.get_current_span().get_span_context().is_valid


def test_async_generator_finalized_by_the_loop_after_gc(telemetry_capture: Capture) -> None:
    """An async-generator tool dropped mid-iteration is closed by the loop's hook: clean-up, span ok."""
    done: list[str] = []

    @telemetry.instrument_tool(kind="read")
    async def stream() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            await asyncio.sleep(0)
            done.append("cleaned up")

    async def main() -> None:
        async for _ in stream():
            break  # the generator is unreferenced now; the loop's finalizer schedules aclose()
        for _ in range(5):
            await asyncio.sleep(0)
        assert done == ["cleaned up"]
        assert not trace.get_current_span().get_span_context().is_valid
        assert telemetry.current_call() is NO_CALL

    asyncio.run(main())
    span = telemetry_capture.span("stream")
    assert span.end_time is not None and span.status.status_code is not StatusCode.ERROR

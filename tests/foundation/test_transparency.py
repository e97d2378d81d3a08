"""Telemetry never changes what a tool does: values, exceptions, signatures, protocols."""

from __future__ import annotations

import asyncio
import inspect
import traceback
from collections.abc import Iterator

import pytest

import telemetry
from telemetry.testing import Capture, capture

from .kinds import KINDS, drive, make


@pytest.fixture(params=["configured", "unconfigured"])
def mode(request: pytest.FixtureRequest) -> Iterator[Capture | None]:
    """Run each test once with telemetry recording and once with no runtime at all."""
    if request.param == "unconfigured":
        yield None
        return
    with capture() as cap:
        yield cap


class Boom(Exception):
    pass


@pytest.mark.parametrize("kind", KINDS)
def test_same_value(kind: str, mode: Capture | None) -> None:
    """A decorated tool returns (or yields) exactly what the bare tool does."""
    bare = make(kind, lambda x, y: {"sum": x + y})
    decorated = telemetry.instrument_tool(make(kind, lambda x, y: {"sum": x + y}))
    assert drive(kind, decorated, 2, y=5) == drive(kind, bare, 2, y=5)
    if mode is not None:
        span = mode.span("tool")
        assert span.attributes["tool.transport"] == "ok"


@pytest.mark.parametrize("kind", KINDS)
def test_same_exception_object(kind: str, mode: Capture | None) -> None:
    """The tool's own exception object reaches the caller, raised where the tool raised it."""
    raised: list[BaseException] = []

    def body(x: int, y: int) -> None:
        err = Boom("bad")
        raised.append(err)
        raise err

    decorated = telemetry.instrument_tool(make(kind, body))
    with pytest.raises(Boom) as info:
        drive(kind, decorated, 1)
    assert info.value is raised[0]
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.name == "body" and "raise err" in (last.line or "")
    if mode is not None:
        span = mode.span("tool")
        assert span.attributes["tool.transport"] == "error"
        assert span.attributes["error.type"].endswith("Boom")


@pytest.mark.parametrize("kind", KINDS)
def test_signature_and_metadata_preserved(kind: str) -> None:
    """inspect sees the original signature, annotations, name, docstring and function kind."""
    bare = make(kind, lambda x, y: None)
    decorated = telemetry.instrument_tool(bare)
    assert inspect.signature(decorated) == inspect.signature(bare)
    assert decorated.__wrapped__ is bare
    assert decorated.__annotations__ == bare.__annotations__
    assert decorated.__name__ == bare.__name__ and decorated.__doc__ == bare.__doc__
    for check in (inspect.iscoroutinefunction, inspect.isgeneratorfunction, inspect.isasyncgenfunction):
        assert check(decorated) == check(bare)


def test_generator_send_throw_close(mode: Capture | None) -> None:
    """send(), throw() and close() reach the tool's generator and its finally runs."""
    log: list[object] = []

    @telemetry.instrument_tool
    def echo() -> object:
        try:
            while True:
                try:
                    got = yield "ready"
                    log.append(("got", got))
                except ValueError as exc:
                    log.append(("caught", str(exc)))
        finally:
            log.append("closed")

    gen = echo()
    assert next(gen) == "ready"
    assert gen.send(41) == "ready"
    assert gen.throw(ValueError("handled")) == "ready"
    gen.close()
    assert log == [("got", 41), ("caught", "handled"), "closed"]
    if mode is not None:
        span = mode.span("echo")
        assert span.attributes["tool.outcome"] == "ok" and span.end_time is not None


def test_generator_unhandled_throw_propagates(mode: Capture | None) -> None:
    """An exception thrown into the generator and not handled comes back out unchanged."""

    @telemetry.instrument_tool
    def gen_tool() -> object:
        yield 1

    gen = gen_tool()
    next(gen)
    err = KeyError("k")
    with pytest.raises(KeyError) as info:
        gen.throw(err)
    assert info.value is err
    if mode is not None:
        assert mode.span("gen_tool").attributes["error.type"] == "KeyError"


def test_async_generator_asend_athrow_aclose(mode: Capture | None) -> None:
    """asend(), athrow() and aclose() reach the tool's async generator."""
    log: list[object] = []

    @telemetry.instrument_tool
    async def stream() -> object:
        try:
            while True:
                try:
                    got = yield "ready"
                    log.append(("got", got))
                except ValueError as exc:
                    log.append(("caught", str(exc)))
        finally:
            log.append("closed")

    async def run() -> None:
        agen = stream()
        assert await agen.__anext__() == "ready"
        assert await agen.asend(7) == "ready"
        assert await agen.athrow(ValueError("handled")) == "ready"
        await agen.aclose()

    asyncio.run(run())
    assert log == [("got", 7), ("caught", "handled"), "closed"]
    if mode is not None:
        assert mode.span("stream").end_time is not None


def test_span_covers_the_await_and_every_iteration() -> None:
    """The span's duration includes the awaited work and the time spent between items."""
    import time

    @telemetry.instrument_tool
    async def slow() -> str:
        await asyncio.sleep(0.05)
        return "done"

    @telemetry.instrument_tool
    def items() -> object:
        yield 1
        time.sleep(0.05)
        yield 2

    with capture() as cap:
        assert asyncio.run(slow()) == "done"
        assert list(items()) == [1, 2]
        for name in ("slow", "items"):
            span = cap.span(name)
            assert span.end_time - span.start_time >= 45_000_000, name


def test_methods_classmethods_staticmethods(mode: Capture | None) -> None:
    """Instance methods, classmethods and staticmethods work in either decorator order."""

    class Tools:
        factor = 3

        @telemetry.instrument_tool
        def scale(self, x: int) -> int:
            return x * self.factor

        @telemetry.instrument_tool
        @classmethod
        def cls_scale(cls, x: int) -> int:
            return x * cls.factor

        @classmethod
        @telemetry.instrument_tool
        def cls_scale_inner(cls, x: int) -> int:
            return x * cls.factor

        @telemetry.instrument_tool
        @staticmethod
        def double(x: int) -> int:
            return 2 * x

    tools = Tools()
    assert (tools.scale(2), Tools.cls_scale(2), Tools.cls_scale_inner(2), Tools.double(2)) == (6, 6, 6, 4)
    assert list(inspect.signature(Tools.cls_scale).parameters) == ["x"]
    if mode is not None:
        assert {s.attributes["gen_ai.tool.name"] for s in mode.spans()} == {
            "scale",
            "cls_scale",
            "cls_scale_inner",
            "double",
        }


def test_bare_and_called_forms_are_the_same_tool() -> None:
    """@instrument_tool and @instrument_tool() produce the same spans."""

    @telemetry.instrument_tool
    def a() -> int:
        return 1

    @telemetry.instrument_tool()
    def b() -> int:
        return 1

    with capture() as cap:
        a(), b()
        assert cap.span("a").name == "execute_tool a" and cap.span("b").name == "execute_tool b"

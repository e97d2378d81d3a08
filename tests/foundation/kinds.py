"""The four function kinds, built the same way so every test can be parametrised over them.

``make(kind, body)`` returns an undecorated tool of that kind whose observable behaviour is
driven by ``body`` (a callable taking the arguments). ``drive(kind, fn, *args)`` runs it to
completion synchronously and returns what a caller would observe: the return value, or for
generators the list of items followed by the return value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

KINDS = ("sync", "async", "generator", "asyncgen")


def make(kind: str, body: Callable[..., Any]) -> Callable[..., Any]:
    if kind == "sync":

        def tool(x: int, y: int = 1) -> Any:
            """A sync tool."""
            return body(x, y)

    elif kind == "async":

        async def tool(x: int, y: int = 1) -> Any:  # type: ignore[misc]
            """An async tool."""
            await asyncio.sleep(0)
            return body(x, y)

    elif kind == "generator":

        def tool(x: int, y: int = 1) -> Any:  # type: ignore[misc]
            """A generator tool."""
            yield x
            yield y
            return body(x, y)

    else:

        async def tool(x: int, y: int = 1) -> Any:  # type: ignore[misc]
            """An async-generator tool."""
            yield x
            await asyncio.sleep(0)
            yield y
            body(x, y)

    return tool


def drive(kind: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if kind == "sync":
        return fn(*args, **kwargs)
    if kind == "async":
        return asyncio.run(fn(*args, **kwargs))
    if kind == "generator":
        gen = fn(*args, **kwargs)
        items = []
        while True:
            try:
                items.append(next(gen))
            except StopIteration as stop:
                return items, stop.value

    async def consume() -> Any:
        return [item async for item in fn(*args, **kwargs)], None

    return asyncio.run(consume())

"""Shared by the MCP tests: the extra's presence rule, and the SDK's own spans recorded for real.

Importing this module skips the importing test module when the ``mcp`` SDK is not installed, and
fails it when CI=true (CI must install the ``[mcp]`` extra). No ``conftest.py`` here on purpose:
``tests/`` has one already and this folder is not a package (an ``__init__.py`` would let
``tests/mcp`` shadow the SDK's ``mcp`` package).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("mcp") is None:  # pragma: no cover - depends on the environment
    if os.environ.get("CI") == "true":
        raise RuntimeError("the mcp SDK is required in CI (CI=true); install outcome-telemetry[mcp]")
    pytest.skip("the mcp SDK (outcome-telemetry[mcp]) is not installed", allow_module_level=True)

import mcp.shared._otel as sdk_otel  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


@pytest.fixture
def sdk_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Record the SDK's own CLIENT/SERVER spans in memory for one test.

    The SDK traces through a module-level tracer taken from the global provider. Tests must not
    install a global provider (it can be set once per process and would leak into every other
    test), so this points that one tracer at a real SDK provider of the test's own.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(sdk_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    yield exporter
    provider.shutdown()


def by_name(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    """The one span called ``name``."""
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"expected one span named {name!r}, got {[s.name for s in spans]}"
    return found[0]


def listing(tools: Any) -> dict[str, str]:
    """``tools/list`` as the client got it: per tool, the JSON bytes of what schema builders decide."""
    return {
        t.name: json.dumps(
            {
                "description": t.description,
                "inputSchema": t.input_schema,
                "outputSchema": t.output_schema,
                "title": t.title,
            },
            sort_keys=False,
        )
        for t in tools.tools
    }

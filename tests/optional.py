"""Optional frameworks the tests drive, imported where a test that needs one runs, never at collection.

Each xdist worker collects every test module; a framework imported at module level costs every
worker its import (LangChain, the OpenAI Agents SDK, pydantic-ai and the MCP SDK take from half a
second to two CPU seconds each) even when that worker runs none of its tests. ``require`` is
``pytest.importorskip`` for one test instead, with the suite's CI rule: when ``CI=true`` a missing
framework fails the test (CI must install it), elsewhere the test skips saying what to install.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def in_ci() -> bool:
    """True when the tests run in CI, where a missing optional part is a failure, never a skip."""
    return os.environ.get("CI") == "true"


def require(module: str, extra: str) -> ModuleType:
    """Import ``module``; skip the test naming the extra to install, or fail it when CI=true."""
    if in_ci():
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"install outcome-telemetry[{extra}]")

"""Shared by the audit tests: the extra's presence rule, the demo's surfaces, and running the CLI.

Auditing Python tools builds their JSON Schema with pydantic and MCP targets use the ``mcp``
client, both from the ``[mcp]`` extra: without it these tests skip, except in CI (CI=true), where
they fail. Not a conftest on purpose (``tests/`` has one; this folder is not a package).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("mcp") is None:  # pragma: no cover - depends on the environment
    if os.environ.get("CI") == "true":
        raise RuntimeError("the mcp SDK is required in CI (CI=true); install outcome-telemetry[mcp]")
    pytest.skip("the audit needs outcome-telemetry[mcp] (pydantic and the mcp client)", allow_module_level=True)

from telemetry.audit._cli import main  # noqa: E402
from telemetry.demo._world import World  # noqa: E402

HERE = Path(__file__).resolve().parent
BAD_SERVER = HERE / "bad_mcp_server.py"
EXAMPLE = HERE.parents[1] / "examples" / "mcp_guarded_server.py"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A fresh demo world (its guarded and legacy tools) on its own SQLite file."""
    w = World(tmp_path / "world.sqlite", random.Random(3), catalog_size=2)
    yield w
    w.store.close()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``outcome-telemetry audit ARGS`` in this process: (exit status, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(capsys, *args, "--format", "json")
    assert out, err
    return code, json.loads(out)


def answers(document: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``{tool: {check: answer}}`` of a JSON audit document."""
    return {t["name"]: {k: a["answer"] for k, a in t["answers"].items()} for t in document["tools"]}


def codes(document: dict[str, Any]) -> dict[str, set[str]]:
    """``{tool: {finding codes}}`` of a JSON audit document."""
    return {t["name"]: {f["code"] for f in t["findings"]} for t in document["tools"]}


def stdio_command() -> str:
    """The --mcp-stdio command line that starts the synthetic bad server with this interpreter."""
    import shlex

    return f"{shlex.quote(sys.executable)} {shlex.quote(str(BAD_SERVER))}"

"""tools/list: schemas unchanged by instrumentation, hints published as annotations, decorator order."""

from __future__ import annotations

import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

import telemetry.mcp as tmcp
from telemetry import ConfigurationError, instrument_tool
from telemetry import conventions as c

from mcp_support import listing
from module_files import import_module_file


def get_state(key: str, include_history: bool = False) -> dict[str, Any]:
    """Read a value and its version token."""
    return {"ok": True, "key": key, "version": "v1"}


async def put_state(key: str, value: list[int], expected_version: str, ctx: Context) -> dict[str, Any]:
    """Write a value if its version is still `expected_version`."""
    return {"ok": True, "key": key, "version": "v2"}


def count(n: int) -> int:
    """Return n."""
    return n


WRONG_ORDER_MODULE = '''
from mcp.server.mcpserver import MCPServer
from telemetry import instrument_tool

server = MCPServer("wrong order")


@instrument_tool(kind="read", name="echo")
@server.tool()
def echo(text: str) -> str:
    """Echo (decorated in the wrong order on purpose)."""
    return text
'''


PLAIN: list[Callable[..., Any]] = [get_state, put_state, count]
KINDS = {"get_state": "read", "put_state": "write", "count": "read"}


def plain_server() -> MCPServer:
    server = MCPServer("plain")
    for fn in PLAIN:
        server.add_tool(fn)
    return server


def stacked_server() -> MCPServer:
    server = MCPServer("stacked")
    for fn in PLAIN:
        server.tool()(instrument_tool(kind=KINDS[fn.__name__])(fn))
    tmcp.instrument_server(server)  # publishes the stacked tools' hints as annotations
    return server


def helper_server() -> MCPServer:
    server = MCPServer("helper")
    for fn in PLAIN:
        tmcp.tool(server, kind=KINDS[fn.__name__])(fn)
    return server


def instrumented_server() -> MCPServer:
    server = plain_server()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # other wrappers of the same functions are no wrong order
        wrapped = tmcp.instrument_server(server, {name: {"kind": kind} for name, kind in KINDS.items()})
    assert wrapped == ["get_state", "put_state", "count"]
    return server


async def tools_of(server: MCPServer) -> Any:
    async with Client(server, mode="legacy") as client:
        return await client.list_tools()


@pytest.mark.parametrize("build", [stacked_server, helper_server, instrumented_server])
async def test_schemas_are_byte_identical_with_and_without_instrumentation(build: Callable[[], MCPServer]) -> None:
    """Input schema, output schema, title and description are the same bytes as the undecorated tools'."""
    assert listing(await tools_of(build())) == listing(await tools_of(plain_server()))


@pytest.mark.parametrize("build", [stacked_server, helper_server, instrumented_server])
async def test_hints_are_the_annotations_in_tools_list_and_on_the_span(
    build: Callable[[], MCPServer], telemetry_capture: Any
) -> None:
    """Each tool's readOnly/destructive/idempotent hints in tools/list equal the span's tool.hint.* attributes."""
    server = build()
    tools = {t.name: t for t in (await tools_of(server)).tools}
    async with Client(server, mode="legacy") as client:
        await client.call_tool("get_state", {"key": "k"})
        await client.call_tool("put_state", {"key": "k", "value": [1], "expected_version": "v1"})
    for name, read_only in (("get_state", True), ("put_state", False)):
        annotations = tools[name].annotations
        span = telemetry_capture.span(name)
        assert annotations is not None
        assert annotations.read_only_hint is read_only
        assert span.attributes[c.TOOL_READ_ONLY] is annotations.read_only_hint
        assert span.attributes[c.TOOL_DESTRUCTIVE] is annotations.destructive_hint
        assert span.attributes[c.TOOL_IDEMPOTENT] is annotations.idempotent_hint


async def test_hints_given_as_annotations_drive_the_span(telemetry_capture: Any) -> None:
    """Hints set only as MCP annotations become the decorator's hints; the annotations stay as registered."""
    server = MCPServer("annotated")
    registered = ToolAnnotations(title="Count", read_only_hint=True, open_world_hint=False)
    server.add_tool(count, annotations=registered)
    tmcp.instrument_server(server)
    (tool,) = (await tools_of(server)).tools
    assert tool.annotations == registered  # nothing the user did not ask for reaches the client
    async with Client(server, mode="legacy") as client:
        await client.call_tool("count", {"n": 1})
    span = telemetry_capture.span("count")
    assert span.attributes[c.TOOL_KIND] == c.KIND_READ
    assert (span.attributes[c.TOOL_DESTRUCTIVE], span.attributes[c.TOOL_IDEMPOTENT]) == (False, True)
    assert span.attributes[c.TOOL_READBACK] == c.READBACK_NOT_APPLICABLE


def test_contradicting_hints_are_refused_at_decoration() -> None:
    """A hint given twice with two values fails at once, naming both."""
    with pytest.raises(ConfigurationError, match=r"read_only=False contradicts readOnlyHint=True"):
        tmcp.tool(MCPServer("x"), read_only=False, annotations=ToolAnnotations(read_only_hint=True))(count)
    server = MCPServer("y")
    server.tool(annotations=ToolAnnotations(read_only_hint=True))(instrument_tool(kind="write")(count))
    with pytest.raises(ConfigurationError, match=r"readOnlyHint=True but @instrument_tool decided read_only=False"):
        tmcp.instrument_server(server)


def test_helper_misuse_says_how_to_fix_it() -> None:
    """Bare @telemetry.mcp.tool, double instrumentation, unknown tools and renamed tools fail with the fix."""
    with pytest.raises(ConfigurationError, match=r"call it with the server first"):
        tmcp.tool(count)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"drop @instrument_tool"):
        tmcp.tool(MCPServer("x"))(instrument_tool(count))
    with pytest.raises(ConfigurationError, match=r"does not have; its tools are \['count'\]"):
        server = MCPServer("y")
        server.add_tool(count)
        tmcp.instrument_server(server, {"cuont": {"kind": "read"}})
    renamed = MCPServer("z")
    renamed.tool(name="tally")(instrument_tool(kind="read")(count))
    with pytest.raises(ConfigurationError, match=r"pass name='tally' to instrument_tool"):
        tmcp.instrument_server(renamed)


async def test_a_refused_tool_leaves_the_whole_server_as_it_was(telemetry_capture: Any) -> None:
    """instrument_server refusing one tool (renamed under @instrument_tool, after a bare tool it had
    already wrapped) leaves no tool instrumented: calls record nothing, tools/list is unchanged;
    following the message's advice then instruments both."""
    server = MCPServer("half")
    server.add_tool(get_state)
    server.tool(name="tally")(instrument_tool(kind="read")(count))
    before = [t.model_dump(mode="json", by_alias=True) for t in (await tools_of(server)).tools]
    with pytest.raises(ConfigurationError, match=r"pass name='tally' to instrument_tool"):
        tmcp.instrument_server(server, {"get_state": {"kind": "read", "idempotent": True}})
    async with Client(server, mode="legacy") as client:
        await client.call_tool("get_state", {"key": "k"})
    assert telemetry_capture.spans("get_state") == []
    assert [t.model_dump(mode="json", by_alias=True) for t in (await tools_of(server)).tools] == before
    assert tmcp.uninstrument_server(server) == []  # nothing was left replaced
    fixed = MCPServer("fixed")
    fixed.add_tool(get_state)
    fixed.tool(name="tally")(instrument_tool(kind="read", name="tally")(count))
    assert tmcp.instrument_server(fixed, {"get_state": {"kind": "read"}}) == ["get_state"]
    async with Client(fixed, mode="legacy") as client:
        await client.call_tool("get_state", {"key": "k"})
        await client.call_tool("tally", {"n": 1})
    assert telemetry_capture.calls("get_state") == 1.0 and telemetry_capture.calls("tally") == 1.0


async def test_wrong_decorator_order_is_found_and_fixed_with_a_warning(
    telemetry_capture: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """@instrument_tool above @server.tool(): instrument_server warns how to fix it and puts the wrapper in place."""
    path = tmp_path / f"wrong_order_{uuid.uuid4().hex}.py"
    path.write_text(WRONG_ORDER_MODULE)
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    server = import_module_file(path).server
    async with Client(server, mode="legacy") as client:
        await client.call_tool("echo", {"text": "unrecorded"})
    assert telemetry_capture.spans("echo") == []  # the hazard: the server called the bare function
    with pytest.warns(UserWarning, match=r"Swap the two decorators \(@server.tool\(\) outermost\)"):
        assert tmcp.instrument_server(server) == []
    async with Client(server, mode="legacy") as client:
        await client.call_tool("echo", {"text": "recorded"})
    span = telemetry_capture.span("echo")
    assert span.attributes[c.TOOL_KIND] == c.KIND_READ  # the hints the user wrote, not defaults
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tmcp.instrument_server(server)  # fixed for good: no second warning, no second wrapper
    assert telemetry_capture.calls("echo") == 1.0


def test_import_telemetry_does_not_import_mcp() -> None:
    """The SDK is an optional extra: `import telemetry` (and configure) never loads it."""
    code = "import sys, telemetry, telemetry.testing; print('mcp' in sys.modules, 'telemetry.mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]

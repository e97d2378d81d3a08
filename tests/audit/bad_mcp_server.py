"""A synthetic MCP server over stdio whose tools break every rule the audit checks, on purpose.

Run by the audit tests through the real ``mcp`` client (``--mcp-stdio``). One tool carries a
hostile name and description (terminal escapes, a bidirectional override, JSON and HTML
breakers, a shell fragment) to prove they are printed as inert data and encoded properly.
Pass ``--http PORT`` to serve the same tools over Streamable HTTP on 127.0.0.1 instead.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from hostile_tool import HOSTILE_DESCRIPTION, HOSTILE_NAME


def search(query: str, filters: str = "", status: str = "", limit: int = 10) -> str:
    """Search."""
    return "[]"


def update_record(record_id: str, data: dict[str, Any], force: bool = False, mode: str = "merge") -> str:
    """Update a record with new data."""
    return "ok"


def delete_all_items(collection: str) -> str:
    """Delete every item of a collection at once."""
    return "ok"


def send_email(to: str, body: str) -> str:
    """Send an email to a customer right now."""
    return "sent"


def handoff(subtask: str, context: str) -> str:
    """Hand a subtask to another agent with free-text context."""
    return "ok"


def run(x: int) -> str:
    return str(x)


def read_inventory(sku: str) -> str:
    """Return the stock level of one sku."""
    return "3"


def hostile(value: str) -> str:
    return value


def build() -> MCPServer:
    server = MCPServer("bad tools")
    for fn in (search, update_record, delete_all_items, send_email, handoff, run):
        server.add_tool(fn)
    server.add_tool(read_inventory, annotations=ToolAnnotations(read_only_hint=True))
    server.add_tool(hostile, name=HOSTILE_NAME, description=HOSTILE_DESCRIPTION,
                    annotations=ToolAnnotations(read_only_hint=True))
    return server


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        build().run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        build().run("stdio")

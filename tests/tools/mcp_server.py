"""A real MCP server (FastMCP / MCPServer from the mcp package) for the MCP tests.

    python mcp_server.py stdio
    python mcp_server.py http PORT
"""

from __future__ import annotations

import sys
import time
from typing import Any

try:  # mcp 2.x
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as Server

from mcp.types import CallToolResult, TextContent

server = Server("agent-latency-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


@server.tool()
def timed(seconds: float) -> CallToolResult:
    """Sleep and report the server's own handling time in the result's _meta."""
    start = time.perf_counter()
    time.sleep(seconds)
    return CallToolResult(content=[TextContent(type="text", text="timed")],
                          _meta={"io.agent-latency/server_duration":
                                 time.perf_counter() - start})


@server.tool()
def traceparent(ctx: Context) -> str:
    """The traceparent this request carried in _meta (empty when none)."""
    meta: Any = ctx.request_context.meta
    if meta is None:
        return ""
    if isinstance(meta, dict):
        return str(meta.get("traceparent", ""))
    extra = getattr(meta, "model_extra", None) or {}
    return str(extra.get("traceparent", getattr(meta, "traceparent", "")))


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("tool failed on purpose")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        port = int(sys.argv[2])
        try:
            server.run(transport="streamable-http", host="127.0.0.1", port=port)
        except TypeError:  # mcp 1.x: settings on the instance
            server.settings.host = "127.0.0.1"
            server.settings.port = port
            server.run(transport="streamable-http")

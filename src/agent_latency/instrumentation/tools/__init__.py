"""Tool runs: processes, MCP tool calls and agent frameworks' tools and runs."""

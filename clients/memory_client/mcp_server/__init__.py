"""graphrag-memory-mcp: the memory service as Model Context Protocol tools, for any MCP host
(Claude Desktop, Cursor, LangGraph, the OpenAI Agents SDK, GraphRAG's agentic engine), over
stdio or streamable HTTP, on the official MCP Python SDK (the `mcp` extra). It is a front: every
tool is one or two calls of AsyncMemoryClient to the gRPC service, scoped to the caller the
transport identifies (callers), never to a user a tool argument names.

Modules: callers (who is calling), tools (the tools), render (answers as JSON), app (the two
transports), cli (`graphrag-memory-mcp`). Importing this package needs no `mcp`; app and tools
do.
"""

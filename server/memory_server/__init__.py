"""graphrag-memory server."""

"""Client package for the graphrag-memory service: generated stubs live in memory_client.v1."""

"""Per-scope actors that serialize writes for each (username, graphname)."""

from memory_server.actors.registry import ActorRegistry

__all__ = ["ActorRegistry"]

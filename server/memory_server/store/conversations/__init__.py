"""PostgreSQL adapter for the domain's ConversationStore (asyncpg).

Every query is confined to the caller's scope by joining `scopes` on (username, graphname): an
id from another scope simply matches nothing, which the domain reports as NOT_FOUND.

  _sql        the columns and lookups every statement shares, rows read back
  _messages   storing messages (memory_append_message), the user message a reply answers
  _summaries  a turn's context candidates, what is left to fold, storing a summary
  _listing    the UI's list and pages (page tokens), rename, feedback, delete
  _episodes   messages as long-term memory: their lexical matches, retention
"""

from __future__ import annotations

import asyncpg

from memory_server.store.conversations._episodes import ConversationEpisodes
from memory_server.store.conversations._listing import ConversationListing
from memory_server.store.conversations._messages import ConversationMessages
from memory_server.store.conversations._summaries import ConversationSummaries


class PostgresConversationStore(
    ConversationMessages, ConversationSummaries, ConversationListing, ConversationEpisodes
):
    """The domain's ConversationStore (memory.ports)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool


__all__ = ["PostgresConversationStore"]

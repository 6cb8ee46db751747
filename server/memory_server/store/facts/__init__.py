"""PostgreSQL adapter for long-term facts: bitemporal versions, history and the vector outbox.

Every fact change writes its version rows, its history rows and its outbox rows in one
transaction, so the vector index can always be brought to exactly what PostgreSQL says.

  _sql      the belief predicate and the other pieces every statement shares
  _reads    live facts, versions believed as of a time, lexical matches, a fact's history
  _writes   applying reconciliation, recall bookkeeping, retention, erasure of a scope
  _transaction  the statements of one change in its transaction: versions, history, outbox rows
  _outbox   claiming outbox rows for the vector index; the embedding model of record
  _links    semantic links between versions: followed by recall, written by the outbox
"""

from __future__ import annotations

from memory_server.store.facts._links import FactLinks
from memory_server.store.facts._outbox import EmbeddingModelMismatch, VectorOutbox
from memory_server.store.facts._reads import (
    LEXICAL_STATEMENT,
    FactReads,
    lexical_arguments,
    lexical_statement,
)
from memory_server.store.facts._writes import FactWrites
from memory_server.store.lexical import LEXICAL_NOW


class PostgresFactStore(FactReads, FactWrites, FactLinks, VectorOutbox):
    """The domain's FactStore (memory.ports), and the rows the outbox actor drains
    (outbox.port's OutboxRows)."""


__all__ = [
    "LEXICAL_NOW",
    "LEXICAL_STATEMENT",
    "EmbeddingModelMismatch",
    "PostgresFactStore",
    "lexical_arguments",
    "lexical_statement",
]

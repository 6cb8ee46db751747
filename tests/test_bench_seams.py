"""The public seams bench/ uses instead of the server's private parts: what each one answers
(the benches themselves run in tests/test_embed_padding.py, test_lexical_ab.py and others)."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_server.embedding import MiniLMBackend
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.store.facts import (
    LEXICAL_NOW,
    LEXICAL_STATEMENT,
    PostgresFactStore,
    lexical_arguments,
    lexical_statement,
)
from memory_server.store.lexical import LEXICAL_ROW_BUDGET


def test_token_counts_are_what_the_model_sees_of_each_text() -> None:
    backend = MiniLMBackend(max_tokens=8)
    try:
        # [CLS] and [SEP] around every text; a long one cut at max_tokens.
        assert backend.token_counts(["", "hello world", "word " * 50]) == [2, 4, 8]
    finally:
        backend.close()


class _Recording:
    """A pool (and its one connection) that records what it is asked to fetch."""

    def __init__(self) -> None:
        self.fetched: list[tuple[str, tuple[object, ...]]] = []

    def acquire(self, timeout: float | None = None) -> _Recording:
        return self

    async def __aenter__(self) -> _Recording:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def fetch(self, sql: str, *args: object, timeout: float | None = None) -> list[object]:
        self.fetched.append((sql, args))
        return []


async def test_the_lexical_statement_is_the_one_the_store_sends() -> None:
    pool = _Recording()
    scope, now = Scope("ann", "Finance"), AsOf()
    past = AsOf(transaction_time=datetime(2026, 1, 1, tzinfo=UTC))
    store = PostgresFactStore(pool)  # type: ignore[arg-type]
    await store.lexical(scope, "who owns the graph", 50, now)
    await store.lexical(scope, "who owns the graph", 50, past)
    assert pool.fetched == [
        lexical_statement(scope, "who owns the graph", 50, now),
        lexical_statement(scope, "who owns the graph", 50, past),
    ]
    assert lexical_statement(scope, "q", 7, now) == (
        LEXICAL_NOW,
        ("ann", "Finance", "q", 7, LEXICAL_ROW_BUDGET),
    )
    assert lexical_statement(scope, "q", 7, past) == (
        LEXICAL_STATEMENT,
        lexical_arguments(scope, "q", 7, past),
    )
    assert lexical_arguments(scope, "q", 7, past)[:4] == ("ann", "Finance", "q", 7)

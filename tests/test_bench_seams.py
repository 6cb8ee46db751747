"""The public seams bench/ uses instead of the server's private parts: what each one answers
(the benches themselves run in tests/test_embed_padding.py, test_lexical_ab.py and others)."""

from __future__ import annotations

from memory_server.embedding import MiniLMBackend
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.store.facts import LEXICAL_STATEMENT, PostgresFactStore, lexical_arguments


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
    scope, as_of = Scope("ann", "Finance"), AsOf()
    await PostgresFactStore(pool).lexical(scope, "who owns the graph", 50, as_of)  # type: ignore[arg-type]
    assert pool.fetched == [
        (LEXICAL_STATEMENT, lexical_arguments(scope, "who owns the graph", 50, as_of))
    ]
    assert lexical_arguments(scope, "q", 7, as_of)[:4] == ("ann", "Finance", "q", 7)

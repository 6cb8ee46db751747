"""The scope write lock, for the store's own transactions.

Several servers may share one database, and a server's actors order only the writes that reach
that server. So every transaction that writes a scope's messages, summaries or facts takes the
scope's lock as its first statement, and the database orders the scope's writes whichever
server they came from. The lock and its key (derived from the scope_hash) are defined once, in
migrations/0003_several_servers.sql; `memory_append_message` takes it itself.

It is `pg_advisory_xact_lock`: held until the transaction ends, so a crashed server never
leaves one behind. Callers take it only around database work, never while an LLM or an
embedding model is being waited for.
"""

from __future__ import annotations

import asyncpg

from memory_server.memory.identity import Scope


async def lock_scope(
    conn: asyncpg.Connection, scope: Scope, timeout_s: float | None = None
) -> None:
    """Waits for and takes the scope's write lock, until `conn`'s transaction ends."""
    if not conn.is_in_transaction():
        # Outside a transaction the lock would be released as soon as it was taken.
        raise RuntimeError("the scope write lock needs a transaction")
    await conn.execute("SELECT memory_lock_scope($1)", scope.scope_hash, timeout=timeout_s)

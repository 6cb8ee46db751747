"""Read-only figures for monitoring, one cheap statement each."""

from __future__ import annotations

import asyncpg

# count(*) of the outbox is small by construction: rows leave it once the index has them.
_OUTBOX = """
SELECT count(*) AS pending,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS lag_s
FROM vector_outbox
"""


async def outbox_stats(pool: asyncpg.Pool) -> tuple[int, float]:
    """(changes waiting for the vector index, age in seconds of the oldest; 0 when none)."""
    row = await pool.fetchrow(_OUTBOX)
    assert row is not None
    return int(row["pending"]), float(row["lag_s"])

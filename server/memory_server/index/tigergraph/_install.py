"""The schema install after an outage at start: the server serves with long-term memory
degraded while this keeps trying, with back-off, until TigerGraph installs the schema or gives
a permanent answer."""

from __future__ import annotations

import asyncio
import logging

from memory_server.index.tigergraph._index import TigerGraphIndex
from memory_server.memory.errors import Unavailable

log = logging.getLogger(__name__)

# TigerGraph publishes no bound on how long INSTALL QUERY compiles; the install-schema command
# allows 600 s, and so does the background install.
_INSTALL_TIMEOUT_S = 600.0
_INSTALL_RETRY_S = (2.0, 5.0, 15.0, 30.0, 60.0)


async def install_until_done(index: TigerGraphIndex) -> None:
    """install_schema again after an Unavailable at start, with back-off, until it succeeds
    or TigerGraph gives a permanent answer (logged as an error; recall stays degraded)."""
    attempt = 0
    while True:
        await asyncio.sleep(_INSTALL_RETRY_S[min(attempt, len(_INSTALL_RETRY_S) - 1)])
        attempt += 1
        try:
            await index.install_schema(install_timeout_s=_INSTALL_TIMEOUT_S)
        except Unavailable as exc:
            log.warning("TigerGraph schema install attempt %d failed, retrying: %s", attempt, exc)
        except Exception as exc:
            log.error("TigerGraph schema install failed for good: %s", exc)
            return
        else:
            log.info("TigerGraph schema installed after %d retries", attempt)
            return

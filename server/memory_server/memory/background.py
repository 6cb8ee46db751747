"""Background work the domain owns (compactions, extractions): at shutdown it gets a bounded
time to finish, then what is still running is cancelled and awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Collection


async def finish_or_cancel(tasks: Collection[asyncio.Task[None]], timeout_s: float) -> int:
    """Waits up to `timeout_s` for `tasks`, cancels the rest and awaits them; returns how many
    were cancelled."""
    if not tasks:
        return 0
    _, late = await asyncio.wait(tasks, timeout=timeout_s)
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    return len(late)

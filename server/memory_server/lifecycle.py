"""The shape every long-lived component shares (house style): `start()`, an idempotent `close()`
that is safe before start, and `async with` for the pair."""

from __future__ import annotations

from typing import Self


class Lifecycle:
    """Base for components that `main` starts and closes: subclasses implement `start` and
    `close`; `async with component:` starts it and closes it on the way out."""

    async def start(self) -> None:
        """Acquire what the component needs (connections, tasks). Default: nothing."""

    async def close(self) -> None:
        """Release it; a second call, or one before `start`, does nothing."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

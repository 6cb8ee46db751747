"""The MCP tools: the service's long-term memory, for the caller the transport identified
(memory_client.mcp_server.callers), through AsyncMemoryClient. No tool takes a user; `graph`
picks one of the caller's graphs (the first when left out).

A failure is a tool error (MCP's `isError` result, which the model reads) whose text starts with
the gRPC status it stands for: `INVALID_ARGUMENT: text: holds a secret (api key)`, `NOT_FOUND:
...`, `PERMISSION_DENIED: graph 'HR' is not one this caller may use`, `UNAVAILABLE: the memory
service cannot be reached ...; try again`. The service's own checks apply to every text that
comes in (a fact holding a secret is refused, never stored); this front adds none of its own
and logs no argument.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import grpc
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memory_client.client import AsyncMemoryClient
from memory_client.errors import MemoryClientError
from memory_client.mcp_server import render
from memory_client.mcp_server.callers import Caller, GraphRefused

__all__ = ["Memory", "register"]

A = TypeVar("A")
B = TypeVar("B")

Graph = Annotated[
    str | None,
    Field(description="One of your graphs (knowledge bases); leave out for your default one."),
]
FactId = Annotated[str, Field(description="A memory's fact_id, as search or list returned it.")]
Kind = Annotated[
    Literal["preference", "decision", "goal", "identity", "other"] | None,
    Field(description="What sort of memory it is; left out, the service decides."),
]
AsOf = Annotated[
    datetime | None,
    Field(description="Valid time, ISO 8601 with a timezone: what was true then."),
]
KnownAt = Annotated[
    datetime | None,
    Field(description="Transaction time, ISO 8601 with a timezone: what memory knew then."),
]

# What a host may show or ask before a call (hints: a host decides what to trust). Memory is
# this service's own, never the open world; reads change nothing; stating a fact again stores
# nothing new; an update supersedes a version and a forget ends a fact (history kept both ways).
_READS = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_ADDS = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
_REPLACES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)
_ENDS = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
)

# The conversation GetContext is asked about when a host names none: no conversation of the
# user's has this id unless they made one, so the context is long-term memory alone.
CONTEXT_CONVERSATION = "mcp"

_HINTS = {
    grpc.StatusCode.UNAVAILABLE: "the memory service cannot be reached or is not ready",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the memory service did not answer in time",
    grpc.StatusCode.UNAUTHENTICATED: "the memory service refused this MCP server's token",
    grpc.StatusCode.PERMISSION_DENIED: "the memory service refused this MCP server",
}
_RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def _refusal(exc: MemoryClientError) -> ToolError:
    hint = _HINTS.get(exc.code)
    text = f"{exc.code.name}: {hint} ({exc.details})" if hint else f"{exc.code.name}: {exc.details}"
    return ToolError(text + ("; try again" if exc.code in _RETRY else ""))


def _aware(name: str, value: datetime | None) -> datetime | None:
    if value is not None and value.utcoffset() is None:
        raise ToolError(f"INVALID_ARGUMENT: {name}: add a timezone (Z or an offset like +02:00)")
    return value


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both calls at once; the first failure is raised once both are done (none is left
    running, none unretrieved)."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    for outcome in (a, b):
        if isinstance(outcome, BaseException):
            raise outcome
    return a, b  # type: ignore[return-value]


class Memory:
    """What every tool needs: the service's client (opened on first use, in the loop that
    serves) and who the calling request is."""

    def __init__(
        self,
        open_client: Callable[[], AsyncMemoryClient],
        identify: Callable[[Context[Any, Any, Any]], Caller],
    ) -> None:
        self._open = open_client
        self._client: AsyncMemoryClient | None = None
        self.identify = identify

    def client(self) -> AsyncMemoryClient:
        if self._client is None:
            self._client = self._open()
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    @asynccontextmanager
    async def call(
        self, ctx: Context[Any, Any, Any], graph: str | None
    ) -> AsyncIterator[tuple[AsyncMemoryClient, str, str]]:
        """(client, user, graph) for one tool call; the service's errors as tool errors."""
        caller = self.identify(ctx)
        try:
            chosen = caller.graph(graph)
        except GraphRefused as exc:
            raise ToolError(f"PERMISSION_DENIED: {exc}") from None
        try:
            yield self.client(), caller.user, chosen
        except MemoryClientError as exc:
            raise _refusal(exc) from None


def register(server: FastMCP, memory: Memory) -> None:
    """Adds the memory tools to `server`."""

    @server.tool(
        title="Search memory",
        annotations=_READS,
        description="Search what is remembered about you: facts (with their scores, when they "
        "were true and when they were recorded) and, unless include_episodes is false, what "
        "was said in your earlier conversations. as_of / known_at ask about the past.",
    )
    async def search_memory(
        ctx: Context[Any, Any, Any],
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        graph: Graph = None,
        top_k: Annotated[int, Field(ge=1, le=100, description="At most this many of each.")] = 10,
        include_episodes: bool = True,
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> dict[str, Any]:
        valid, known = _aware("as_of", as_of), _aware("known_at", known_at)
        async with memory.call(ctx, graph) as (client, user, chosen):
            facts = client.search_facts(
                user, chosen, query, top_k=top_k, threshold=0.0,
                as_of_valid_time=valid, as_of_transaction_time=known,
            )  # fmt: skip
            if include_episodes:  # both searches at once
                said = client.search_episodes(
                    user, chosen, query, top_k=top_k, threshold=0.0,
                    as_of_valid_time=valid, as_of_transaction_time=known,
                )  # fmt: skip
                found, episodes = await _both(facts, said)
            else:
                found, episodes = await facts, None
        return {
            "graph": chosen,
            "facts": [render.scored_fact(s) for s in found.results],
            "episodes": [render.episode(e.message, e.score) for e in episodes.results]
            if episodes is not None
            else [],
        }

    @server.tool(
        title="Remember",
        annotations=_ADDS,
        description="Store a fact about you or your world, e.g. 'Prefers answers in French'. "
        "Stating a fact already remembered stores nothing new. A text holding a secret "
        "(a key, a password) is refused.",
    )
    async def remember(
        ctx: Context[Any, Any, Any],
        text: Annotated[str, Field(description="The fact, one claim in one sentence.")],
        graph: Graph = None,
        kind: Kind = None,
        valid_from: Annotated[
            datetime | None,
            Field(description="When it became true, ISO 8601 with a timezone; left out: now."),
        ] = None,
    ) -> dict[str, Any]:
        since = _aware("valid_from", valid_from)
        async with memory.call(ctx, graph) as (client, user, chosen):
            added = await client.add_fact(user, chosen, text, kind=kind or "", valid_time=since)
        return {"graph": chosen, "fact": render.fact(added.fact)}

    @server.tool(
        title="Update a memory",
        annotations=_REPLACES,
        description="Replace a fact's text with a new version. The old version stays in its "
        "history (memory_history), recorded as superseded.",
    )
    async def update_memory(
        ctx: Context[Any, Any, Any],
        fact_id: FactId,
        text: Annotated[str, Field(description="The fact as it now stands.")],
        graph: Graph = None,
        kind: Kind = None,
    ) -> dict[str, Any]:
        async with memory.call(ctx, graph) as (client, user, chosen):
            updated = await client.update_fact(user, chosen, fact_id, text, kind=kind or "")
        return {"graph": chosen, "fact": render.fact(updated.fact)}

    @server.tool(
        title="Forget a memory",
        annotations=_ENDS,
        description="Stop recalling a fact. reason 'no_longer_true': it was true until now "
        "(its valid time ends); 'never_true': it was wrong (only the belief ends). Its "
        "history is kept either way.",
    )
    async def forget_memory(
        ctx: Context[Any, Any, Any],
        fact_id: FactId,
        graph: Graph = None,
        reason: Literal["no_longer_true", "never_true"] = "no_longer_true",
    ) -> dict[str, Any]:
        async with memory.call(ctx, graph) as (client, user, chosen):
            await client.delete_fact(user, chosen, fact_id, ended=reason == "no_longer_true")
            history = await client.get_fact_history(user, chosen, fact_id)
        return {
            "graph": chosen,
            "fact_id": fact_id,
            "forgotten": True,
            "reason": reason,
            "events": [render.event(e) for e in history.events],
        }

    @server.tool(
        title="Memory context for a question",
        annotations=_READS,
        description="The memory block to answer a question with, as the service renders it "
        "for a prompt: the facts and earlier conversations it brings up, within the token "
        "budget, and (with conversation_id) that conversation's recent turns and summary.",
    )
    async def memory_context(
        ctx: Context[Any, Any, Any],
        question: Annotated[str, Field(description="The question about to be answered.")],
        graph: Graph = None,
        conversation_id: Annotated[
            str | None, Field(description="A conversation of yours to include, if any.")
        ] = None,
    ) -> dict[str, Any]:
        conversation = conversation_id or CONTEXT_CONVERSATION
        async with memory.call(ctx, graph) as (client, user, chosen):
            got = await client.get_context(user, chosen, conversation, question=question)
        c = got.context
        return {
            "graph": chosen,
            "context": c.rendered,
            "tokens": c.total_tokens,
            "budget_tokens": c.budget_tokens,
            "conversation_found": got.conversation_exists,
            "facts": [render.recalled_fact(f) for f in c.long_term.facts],
            "episodes": [render.recalled_episode(e) for e in c.long_term.episodes],
            "degraded": c.long_term.degraded_reason or None,
        }

    @server.tool(
        title="List memories",
        annotations=_READS,
        description="The facts remembered about you, a page at a time (pass next_page_token "
        "back for more). as_of / known_at list them as they stood in the past.",
    )
    async def list_memories(
        ctx: Context[Any, Any, Any],
        graph: Graph = None,
        page_size: Annotated[int, Field(ge=1, le=500)] = 50,
        page_token: Annotated[str, Field(description="From the previous page.")] = "",
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> dict[str, Any]:
        valid, known = _aware("as_of", as_of), _aware("known_at", known_at)
        async with memory.call(ctx, graph) as (client, user, chosen):
            page = await client.list_facts(
                user, chosen, page_size=page_size, page_token=page_token,
                as_of_valid_time=valid, as_of_transaction_time=known,
            )  # fmt: skip
        return {
            "graph": chosen,
            "facts": [render.fact(f) for f in page.facts],
            "next_page_token": page.next_page_token or None,
        }

    @server.tool(
        title="A memory's history",
        annotations=_READS,
        description="Every version of a fact (oldest first), what happened to it and when "
        "(added, updated, deleted, evicted, with provenance), and the facts linked to it.",
    )
    async def memory_history(
        ctx: Context[Any, Any, Any], fact_id: FactId, graph: Graph = None
    ) -> dict[str, Any]:
        async with memory.call(ctx, graph) as (client, user, chosen):
            got, history = await _both(
                client.get_fact(user, chosen, fact_id),
                client.get_fact_history(user, chosen, fact_id),
            )
        return {
            "graph": chosen,
            "fact_id": fact_id,
            "current": render.fact(got.current) if got.HasField("current") else None,
            "versions": [render.fact(v) for v in got.versions],
            "events": [render.event(e) for e in history.events],
            "links": [render.link(k) for k in history.links],
        }

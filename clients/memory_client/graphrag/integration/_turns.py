"""What GraphRAG's own code calls once the integration is applied (tigergraph/graphrag cc4eed1).

`graphrag-memory-integrate <checkout>` (`memory_client.graphrag.integration.apply`) makes
these edits, each a line or two; nothing else of GraphRAG changes:

* `graphrag/app/main.py`: `memory.install(app, server_config, current_user=…)` before
  GraphRAG's UI router is included: the client opens with the app and closes with it (the
  app's lifespan), and the UI's history routes answer from the memory service, on the paths
  the stock UI calls (`/ui/user/{id}`, `/ui/conversation/{id}`, `/ui/feedback`) and
  graph-scoped (`/ui/{graph}/…`).
* `graphrag/app/routers/ui.py`, in `chat` (the websocket) and `graph_query`: after the question
  is built, `turn = await memory.begin(auth, graphname, message, conversation_history)` stores
  it and gets the memory; `run_agent` is handed `turn.history`; after the reply is built,
  `await memory.complete(turn, message)` stores it under the reply's own `message_id`, so the
  UI's thumbs up/down on that reply finds it.
* `graphrag/app/agent/agent_generation.py`: `context = answer_context(context)` first in
  `TigerGraphAgentGenerator.generate_answer`, the one call every answer branch (supportai,
  inquiryai, cypher) goes through: the memory block, with a note on how to use it, goes after
  the graph evidence, whatever shape the branch's context has.
* `common/db/connections.py`: the agent's connection passes through `hide_memory(conn)`, so
  the memory index is not among the vertex and edge types GraphRAG lists to its LLM.

The turn reaches `answer_context` through a context variable set by `begin`: GraphRAG runs its
agent in a worker thread (`asyncer.asyncify`, i.e. anyio) and LangGraph runs its nodes with
the caller's context copied, so the answer step sees the turn of the request it belongs to.

Memory never breaks a turn: without `graphrag_config.memory_service_address` every call here
leaves GraphRAG's behaviour as it was, and when the service fails, the turn is answered without
memory and a warning is logged (without the user's text).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from memory_client.client import AsyncMemoryClient
from memory_client.errors import MemoryClientError
from memory_client.graphrag.adapter import GraphRAGMemory, Turn, memory_service_address
from memory_client.graphrag.prompts import (
    GRAPHRAG_HISTORY_TURNS,
    agent_history,
    generation_context,
)
from memory_client.graphrag.schema_view import hide_memory

__all__ = [
    "AgentTurn",
    "GraphRAGIntegration",
    "answer_context",
    "hide_memory",
    "memory",
    "username_from_basic_auth",
]

log = logging.getLogger(__name__)


@dataclass
class AgentTurn:
    """One question through GraphRAG's agent: the history to hand `run_agent`, and the memory
    turn (None when memory is off or the service failed for this turn)."""

    history: list[dict[str, str]]
    turn: Turn | None = None
    completed: bool = field(default=False, compare=False)

    def answer_context(self, graph_context: Any) -> Any:
        """The answer prompt's context with this turn's memory after the graph evidence; the
        context unchanged when there is no memory, or when memory holds nothing yet (a first
        turn with no facts: the block would be its header alone)."""
        if self.turn is None or not _remembers_anything(self.turn):
            return graph_context
        return generation_context(graph_context, self.turn.context_block)


def _remembers_anything(turn: Turn) -> bool:
    context = turn.context
    return bool(context.summary or context.recent_messages or context.long_term.facts)


_CURRENT: ContextVar[AgentTurn | None] = ContextVar("graphrag_memory_turn", default=None)


def answer_context(context: Any) -> Any:
    """For `TigerGraphAgentGenerator.generate_answer`: the context of the turn being answered
    with its memory added (a string), or `context` itself outside a memory turn."""
    current = _CURRENT.get()
    return context if current is None else current.answer_context(context)


def username_from_basic_auth(usr_auth: str) -> str:
    """The username of GraphRAG's `usr_auth`: base64 of "user:password", as the websocket's
    first frame and `graph_query` carry it (already checked against TigerGraph by then)."""
    try:
        decoded = base64.b64decode(usr_auth.encode(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError("usr_auth is not base64 of user:password") from exc
    username, sep, _ = decoded.partition(":")
    if not sep or not username:
        raise ValueError("usr_auth is not base64 of user:password")
    return username


class GraphRAGIntegration:
    """The memory service as GraphRAG's backend uses it: one client for the app's life,
    configured from GraphRAG's server_config.json by `install`."""

    def __init__(self) -> None:
        self._address: str | None = None
        self._client_options: dict[str, Any] = {}
        self._memory: GraphRAGMemory | None = None

    @property
    def enabled(self) -> bool:
        """Whether a memory service is configured (`graphrag_config.memory_service_address`)."""
        return self._address is not None

    @property
    def graphrag_memory(self) -> GraphRAGMemory:
        """The open adapter; raises before `start` or without a configured service."""
        if self._memory is None:
            raise RuntimeError("the memory client is not open: memory.install(app, …) first")
        return self._memory

    def configure(
        self,
        server_config: Mapping[str, Any] | None = None,
        *,
        address: str | None = None,
        **client_options: Any,
    ) -> None:
        """Where the service is: `address`, else `graphrag_config.memory_service_address` of
        GraphRAG's server_config; neither: memory stays off. `client_options` go to
        `AsyncMemoryClient` (timeout_s, retries, token, …)."""
        self._address = address or (
            memory_service_address(server_config) if server_config is not None else None
        )
        self._client_options = dict(client_options)

    async def start(self) -> None:
        if self._address is not None and self._memory is None:
            self._memory = GraphRAGMemory(AsyncMemoryClient(self._address, **self._client_options))

    async def close(self) -> None:
        memory, self._memory = self._memory, None
        if memory is not None:
            await memory.client.close()

    def install(
        self,
        app: Any,
        server_config: Mapping[str, Any] | None = None,
        *,
        current_user: Callable[..., Any],
        is_admin: Callable[..., Any] | None = None,
        prefix: str = "",
        address: str | None = None,
        **client_options: Any,
    ) -> None:
        """Wires memory into GraphRAG's FastAPI `app`: configures the client (see `configure`),
        opens it in the app's lifespan and closes it after, and, when memory is configured,
        adds the UI history routes under `prefix + "/ui"` ahead of GraphRAG's own
        chat-history proxies. `current_user` is GraphRAG's `ui_basic_auth`, unchanged. Who may
        export every user's feedback is `is_admin`, by default chat-history's rule from
        server_config (`memory_client.graphrag.integration.admin`)."""
        self.configure(server_config, address=address, **client_options)
        app.router.lifespan_context = self._lifespan(app.router.lifespan_context)
        if not self.enabled:
            log.info("memory_service_address not set: GraphRAG runs without memory")
            return
        # FastAPI is GraphRAG's; imported here so the rest of this module needs none.
        from memory_client.graphrag.integration.admin import show_user_admin
        from memory_client.graphrag.router import memory_ui_router
        from memory_client.graphrag.stock_routes import stock_ui_router

        if is_admin is None and server_config is not None:
            is_admin = show_user_admin(server_config, current_user)

        before = len(app.router.routes)
        adapter = _LazyMemory(self)
        app.include_router(
            memory_ui_router(adapter, current_user, prefix=f"{prefix}/ui", is_admin=is_admin)
        )
        app.include_router(stock_ui_router(adapter, current_user, prefix=f"{prefix}/ui"))
        # Routes match in order: ours go first, so GraphRAG's chat-history proxies on the same
        # paths (ui.py) are never reached, whether they were included before this or after.
        ours = app.router.routes[before:]
        del app.router.routes[before:]
        app.router.routes[0:0] = ours

    def _lifespan(
        self, inner: Callable[[Any], AbstractAsyncContextManager[Any]]
    ) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
        @asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[Any]:
            await self.start()
            try:
                async with inner(app) as state:
                    yield state
            finally:
                await self.close()

        return lifespan

    async def begin(
        self,
        usr_auth: str,
        graphname: str,
        message: Any,
        history: Sequence[Mapping[str, str]] = (),
    ) -> AgentTurn:
        """Stores the user's question (GraphRAG's `Message`: its conversation_id, message_id
        and content) and returns the turn, whose `history` goes to `run_agent` in place of
        GraphRAG's own. Makes the turn the one `answer_context` adds to the answer prompt."""
        fallback = [dict(item) for item in history][-GRAPHRAG_HISTORY_TURNS:]
        current = AgentTurn(history=fallback)
        if self._memory is not None:
            try:
                turn = await self._memory.begin_turn(
                    username_from_basic_auth(usr_auth),
                    graphname,
                    str(message.conversation_id),
                    str(message.content),
                    message_id=str(message.message_id or ""),
                )
            except MemoryClientError as exc:
                log.warning("memory: StartTurn failed (%s); answering without memory", exc.code)
            else:
                current = AgentTurn(history=agent_history(turn.context), turn=turn)
        _CURRENT.set(current)
        return current

    async def complete(self, current: AgentTurn, message: Any) -> None:
        """Stores GraphRAG's reply `Message` as the answer to `current`, under its own
        message_id (what the UI sends feedback for), with its model and response time."""
        _CURRENT.set(None)
        if self._memory is None or current.turn is None or current.completed:
            return
        try:
            await self._memory.complete_turn(
                current.turn,
                str(message.content or ""),
                model=str(getattr(message, "model", "") or ""),
                response_time_seconds=float(getattr(message, "response_time", 0.0) or 0.0),
                message_id=str(message.message_id or ""),
            )
        except MemoryClientError as exc:
            log.warning("memory: CompleteTurn failed (%s); the reply is not stored", exc.code)
        else:
            current.completed = True


class _LazyMemory(GraphRAGMemory):
    """The routes are built before the app starts, the client only then: each call reaches
    the open adapter."""

    def __init__(self, owner: GraphRAGIntegration) -> None:
        self._owner = owner

    @property
    def client(self) -> AsyncMemoryClient:  # type: ignore[override]
        return self._owner.graphrag_memory.client


#: The integration GraphRAG's edited modules share (`from memory_client.graphrag.integration
#: import memory`); `install` configures it.
memory = GraphRAGIntegration()

"""The history routes on the paths GraphRAG's stock UI calls, which name no graph.

GraphRAG's UI (graphrag-ui at tigergraph/graphrag cc4eed1) fetches `GET /ui/user/{username}`
and then `GET /ui/conversation/{id}` for each conversation (src/components/SideMenu.tsx:58-87,
118), and posts thumbs up/down to `POST /ui/feedback` (src/components/Interact.tsx:35). The
memory service keeps history per user and graph, so these routes look across the graphs the
caller may use (the graph list of GraphRAG's `ui_basic_auth`, in name order):

    GET    /ui/user/{username}          the caller's conversations on all their graphs, newest
                                        first, each with its `graphname`; another user's
                                        name is 403
    GET    /ui/conversation/{id}        the conversation's messages, oldest first; `[]` when no
                                        graph of the caller has it (the stock UI renders the
                                        body as a list)
    POST   /ui/feedback                 GraphRAG's Message; the message is found by its id
    DELETE /ui/conversation/{id}        the conversation, wherever it is; 404 when nowhere

A `current_user` that returns a bare username gives no graph list: these routes then answer 400
(use the graph-scoped ones of `memory_client.graphrag.router`).
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException

from memory_client.errors import NotFoundError
from memory_client.graphrag.adapter import GraphRAGMemory
from memory_client.graphrag.router import Caller, FeedbackBody, MemoryRoute, caller_from_auth

__all__ = ["stock_ui_router"]

_T = TypeVar("_T")


def _graphs(caller: Caller) -> list[str]:
    if caller.graphs is None:
        raise HTTPException(status_code=400, detail="no graph list for this user: use /ui/{graph}/")
    return sorted(caller.graphs)


def stock_ui_router(
    memory: GraphRAGMemory, current_user: Callable[..., Any], *, prefix: str = "/ui"
) -> APIRouter:
    """The graph-less UI routes over `memory`; `current_user` is GraphRAG's `ui_basic_auth`."""
    router = APIRouter(prefix=prefix, tags=["memory"], route_class=MemoryRoute)
    Auth = Annotated[Any, Depends(current_user)]

    @router.get("/user/{user_id}")
    async def list_conversations(user_id: str, auth: Auth) -> list[dict[str, Any]]:
        caller = caller_from_auth(auth)
        if user_id != caller.username:
            raise HTTPException(status_code=403, detail="another user's conversations")
        out: list[dict[str, Any]] = []
        for graphname in _graphs(caller):
            for conversation in await memory.list_conversations(caller.username, graphname):
                out.append({**conversation, "graphname": graphname})
        out.sort(key=lambda c: c.get("update_ts") or "", reverse=True)
        return out

    async def first_graph(
        caller: Caller, call: Callable[[str], Awaitable[_T]]
    ) -> tuple[str, _T] | None:
        """`call(graphname)` on the caller's graphs in name order until one has the thing
        (NOT_FOUND means: not on this graph); None when none has it."""
        for graphname in _graphs(caller):
            try:
                return graphname, await call(graphname)
            except NotFoundError:
                continue
        return None

    @router.get("/conversation/{conversation_id}")
    async def get_conversation(conversation_id: str, auth: Auth) -> list[dict[str, Any]]:
        caller = caller_from_auth(auth)
        found = await first_graph(
            caller,
            lambda graph: memory.conversation_messages(caller.username, graph, conversation_id),
        )
        return [] if found is None else found[1]

    @router.post("/feedback")
    async def submit_feedback(body: FeedbackBody, auth: Auth) -> dict[str, Any]:
        caller = caller_from_auth(auth)
        found = await first_graph(
            caller,
            lambda graph: memory.submit_feedback(
                caller.username, graph, body.message_id, body.feedback or 0, body.comment or ""
            ),
        )
        if found is None:
            raise HTTPException(status_code=404, detail=f"no message {body.message_id}")
        return {"message": "feedback saved", "message_id": found[1]["message_id"]}

    @router.delete("/conversation/{conversation_id}")
    async def delete_conversation(conversation_id: str, auth: Auth) -> dict[str, Any]:
        caller = caller_from_auth(auth)
        found = await first_graph(
            caller,
            lambda graph: memory.delete_conversation(caller.username, graph, conversation_id),
        )
        if found is None:
            raise HTTPException(status_code=404, detail=f"no conversation {conversation_id}")
        return {"message": "Conversation deleted successfully", "deleted_messages": found[1]}

    return router

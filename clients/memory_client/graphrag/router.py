"""GraphRAG's chat-history UI routes, graph-scoped, as a FastAPI router over MemoryService.

Needs the `graphrag` extra (`pip install 'graphrag-memory[graphrag]'`, which adds FastAPI).

    GET    /ui/{graphname}/user                        the caller's conversations on the graph
    GET    /ui/{graphname}/conversation/{id}           a conversation's messages, oldest first
    POST   /ui/{graphname}/feedback                    {message_id, feedback, comment, …}
    DELETE /ui/{graphname}/conversation/{id}           the conversation and its messages

The JSON is chat-history's (see `memory_client.graphrag.adapter`). Who the caller is comes from
the `current_user` dependency you pass: GraphRAG's own authentication (it checks the
credentials against TigerGraph), reduced to the username. The router never trusts a user id
from the path or the body, so one user cannot read or change another's history.
"""

from collections.abc import Callable
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import BaseModel, ConfigDict, Field

from memory_client.errors import MemoryClientError
from memory_client.graphrag.adapter import GraphRAGMemory

__all__ = ["FeedbackBody", "http_status_for", "memory_ui_router"]

# GraphRAG's own rule for graph names in UI paths.
GRAPHNAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

_HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 503,  # memory is switched off on the server
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


def http_status_for(code: grpc.StatusCode) -> int:
    """The HTTP status the UI gets for a failed memory call; anything unexpected is 502."""
    return _HTTP_STATUS.get(code, 502)


class FeedbackBody(BaseModel):
    """GraphRAG's Message as the UI posts it for feedback. Message ids are unique per user and
    graph, so `message_id` alone names the message; `conversation_id` and the other fields
    (content, role, query_sources, …) are accepted and ignored, as chat-history ignored them
    for a message it already had."""

    model_config = ConfigDict(extra="ignore")

    conversation_id: str = ""
    message_id: str = Field(min_length=1)
    feedback: int = Field(default=0, ge=0, le=2)
    comment: str | None = None


def _failed(exc: MemoryClientError) -> HTTPException:
    return HTTPException(status_code=http_status_for(exc.code), detail=exc.details)


def memory_ui_router(
    memory: GraphRAGMemory, current_user: Callable[..., Any], *, prefix: str = "/ui"
) -> APIRouter:
    """The UI routes over `memory`. `current_user` is a FastAPI dependency returning the
    authenticated username (a str), e.g. GraphRAG's `ui_basic_auth` reduced to
    `credentials.username`."""
    router = APIRouter(prefix=prefix, tags=["memory"])
    Graph = Annotated[str, Path(pattern=GRAPHNAME_PATTERN, max_length=256)]
    User = Annotated[str, Depends(current_user)]

    @router.get("/{graphname}/user")
    async def list_conversations(graphname: Graph, username: User) -> list[dict[str, Any]]:
        try:
            return await memory.list_conversations(username, graphname)
        except MemoryClientError as exc:
            raise _failed(exc) from exc

    @router.get("/{graphname}/conversation/{conversation_id}")
    async def get_conversation(
        graphname: Graph, conversation_id: str, username: User
    ) -> list[dict[str, Any]]:
        try:
            return await memory.conversation_messages(username, graphname, conversation_id)
        except MemoryClientError as exc:
            raise _failed(exc) from exc

    @router.post("/{graphname}/feedback")
    async def submit_feedback(
        graphname: Graph, body: FeedbackBody, username: User
    ) -> dict[str, Any]:
        try:
            message = await memory.submit_feedback(
                username, graphname, body.message_id, body.feedback, body.comment or ""
            )
        except MemoryClientError as exc:
            raise _failed(exc) from exc
        return {"message": "feedback saved", "message_id": message["message_id"]}

    @router.delete("/{graphname}/conversation/{conversation_id}")
    async def delete_conversation(
        graphname: Graph, conversation_id: str, username: User
    ) -> dict[str, Any]:
        try:
            deleted = await memory.delete_conversation(username, graphname, conversation_id)
        except MemoryClientError as exc:
            raise _failed(exc) from exc
        return {"message": "Conversation deleted successfully", "deleted_messages": deleted}

    return router

"""GraphRAG's chat-history UI routes, graph-scoped, as a FastAPI router over MemoryService.

Needs the `graphrag` extra (`pip install 'graphrag-memory-client[graphrag]'`, which adds FastAPI).

    GET    /ui/{graphname}/user                        the caller's conversations on the graph
    GET    /ui/{graphname}/conversation/{id}           a conversation's messages, oldest first
    POST   /ui/{graphname}/feedback                    {message_id, feedback, comment, …}
    DELETE /ui/{graphname}/conversation/{id}           the conversation and its messages
    GET    /ui/{graphname}/get_feedback                the caller's messages on the graph;
                                                       an admin's: every user's
    GET    /ui/get_feedback                            the same over all the caller's graphs

The JSON is chat-history's (see `memory_client.graphrag.adapter`). Who the caller is comes from
the `current_user` dependency you pass: GraphRAG's own `ui_basic_auth` as it is, which checks
the credentials against TigerGraph and returns `(graphs, credentials)` — the graphs the user
may use and the HTTP Basic credentials (tigergraph/graphrag cc4eed1,
graphrag/app/routers/ui.py:98-106). A graph not in that list is 403. A dependency returning a
bare username (str) is accepted too; then no graph check is made. The router never trusts a
user id from the path or the body, so one user cannot read or change another's history.

Who is an admin comes from the `is_admin` dependency you pass (a FastAPI dependency returning
a bool; none: nobody). Chat-history's rule — a TigerGraph global role listed in
`chat_config.conversationAccessRoles` — is built from `memory_client.graphrag.roles` (the
integration guide shows the dependency).

An unknown conversation is 404 (chat-history answered 200 and `[]`,
chat-history/db/db.go:64-78): a UI written for chat-history should treat 404 as an empty
conversation.
"""

from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any, NamedTuple

import grpc
from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from memory_client.errors import MemoryClientError
from memory_client.graphrag.adapter import GraphRAGMemory

__all__ = [
    "Caller",
    "FeedbackBody",
    "MemoryRoute",
    "caller_from_auth",
    "http_status_for",
    "memory_ui_router",
]

# GraphRAG's own rule for graph names in UI paths.
GRAPHNAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# A path's {graphname}: GraphRAG's rule, at most 256 characters.
Graph = Annotated[str, Path(pattern=GRAPHNAME_PATTERN, max_length=256)]

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
    #: null is valid in GraphRAG's Message (common/py_schemas/schemas.py:186) and means none.
    feedback: int | None = Field(default=0, ge=0, le=2)
    comment: str | None = None


class Caller(NamedTuple):
    """Who calls: the username, and the graphs they may use (None: not known, no check)."""

    username: str
    graphs: frozenset[str] | None


def caller_from_auth(auth: object) -> Caller:
    """The caller from what `current_user` returned: GraphRAG's `(graphs, credentials)` pair
    (credentials with a `username`, e.g. FastAPI's HTTPBasicCredentials), or a username."""
    if isinstance(auth, str):
        return Caller(auth, None)
    if isinstance(auth, Sequence) and len(auth) == 2:
        graphs, credentials = auth
        username = getattr(credentials, "username", None)
        if isinstance(username, str) and isinstance(graphs, Sequence | set | frozenset):
            return Caller(username, frozenset(str(g) for g in graphs))
    raise TypeError("current_user must return (graphs, credentials) or a username")


def _check_graph(caller: Caller, graphname: str) -> str:
    if caller.graphs is not None and graphname not in caller.graphs:
        raise HTTPException(status_code=403, detail=f"no access to graph {graphname}")
    return caller.username


class MemoryRoute(APIRoute):
    """A route whose failed memory call answers its HTTP status (`http_status_for`) with the
    service's message. An APIRouter holds no exception handlers of its own, and the app's are
    GraphRAG's: the route class goes with the routes into whatever app includes them."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except MemoryClientError as exc:
                raise HTTPException(http_status_for(exc.code), exc.details) from exc

        return answer


def _nobody_is_admin() -> bool:
    return False


def memory_ui_router(
    memory: GraphRAGMemory,
    current_user: Callable[..., Any],
    *,
    prefix: str = "/ui",
    is_admin: Callable[..., Any] | None = None,
) -> APIRouter:
    """The UI routes over `memory`. `current_user` is a FastAPI dependency: GraphRAG's
    `ui_basic_auth` unchanged (returning `(graphs, credentials)`), or one returning the
    authenticated username (a str). `is_admin`, a FastAPI dependency returning a bool (it may
    itself depend on `current_user`; FastAPI runs that once per request), opens the all-users
    feedback export; without it nobody is an admin."""
    router = APIRouter(prefix=prefix, tags=["memory"], route_class=MemoryRoute)

    def graph_user(graphname: Graph, auth: Annotated[Any, Depends(current_user)]) -> str:
        return _check_graph(caller_from_auth(auth), graphname)

    User = Annotated[str, Depends(graph_user)]

    @router.get("/{graphname}/user")
    async def list_conversations(graphname: Graph, username: User) -> list[dict[str, Any]]:
        return await memory.list_conversations(username, graphname)

    @router.get("/{graphname}/conversation/{conversation_id}")
    async def get_conversation(
        graphname: Graph, conversation_id: str, username: User
    ) -> list[dict[str, Any]]:
        return await memory.conversation_messages(username, graphname, conversation_id)

    @router.post("/{graphname}/feedback")
    async def submit_feedback(
        graphname: Graph, body: FeedbackBody, username: User
    ) -> dict[str, Any]:
        message = await memory.submit_feedback(
            username, graphname, body.message_id, body.feedback or 0, body.comment or ""
        )
        return {"message": "feedback saved", "message_id": message["message_id"]}

    @router.delete("/{graphname}/conversation/{conversation_id}")
    async def delete_conversation(
        graphname: Graph, conversation_id: str, username: User
    ) -> dict[str, Any]:
        deleted = await memory.delete_conversation(username, graphname, conversation_id)
        return {"message": "Conversation deleted successfully", "deleted_messages": deleted}

    _feedback_routes(router, memory, current_user, is_admin, User)
    return router


def _feedback_routes(
    router: APIRouter,
    memory: GraphRAGMemory,
    current_user: Callable[..., Any],
    is_admin: Callable[..., Any] | None,
    User: Any,
) -> None:
    """The feedback export: the caller's own messages, or an admin's view of every user's."""
    Admin = Annotated[bool, Depends(is_admin or _nobody_is_admin)]

    async def feedback_of(graphname: str, username: str, admin: bool) -> list[dict[str, Any]]:
        if admin:
            return await memory.feedback_export(graphname)
        out: list[dict[str, Any]] = []
        for conversation in await memory.list_conversations(username, graphname):
            out.extend(
                await memory.conversation_messages(
                    username, graphname, conversation["conversation_id"]
                )
            )
        return out

    @router.get("/get_feedback")
    async def get_all_feedback(
        auth: Annotated[Any, Depends(current_user)], admin: Admin
    ) -> list[dict[str, Any]]:
        """Chat-history's GET /get_feedback, over every graph the caller may use (graph by
        graph, in name order): an admin gets every user's messages, anyone else their own
        (chat-history/routes/routes.go:239-308). A `current_user` that returns a bare username
        gives no graph list: then this route is 400 and the graph-scoped one is the way."""
        caller = caller_from_auth(auth)
        if caller.graphs is None:
            raise HTTPException(
                status_code=400, detail="no graph list for this user: use /{graphname}/get_feedback"
            )
        out: list[dict[str, Any]] = []
        for graphname in sorted(caller.graphs):
            out.extend(await feedback_of(graphname, caller.username, admin))
        return out

    @router.get("/{graphname}/get_feedback")
    async def get_feedback(graphname: Graph, username: User, admin: Admin) -> list[dict[str, Any]]:
        """Chat-history's GET /get_feedback on one graph: an admin gets every user's messages
        (`feedback_json`: chat-history's shape with `user_id`), anyone else every message of
        their own conversations, feedback fields included (chat-history/routes/routes.go:
        259-283)."""
        return await feedback_of(graphname, username, admin)

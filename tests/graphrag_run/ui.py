"""GraphRAG's UI as its stock front end drives it: the websocket `/ui/{graph}/chat` (frames: the
base64 "user:password", the RAG pattern, the conversation id or "new", then one question per
turn; GraphRAG answers `{"conversation_id"}` first, then per question progress frames
`{"content", "response_type": "progress"}` and the reply, GraphRAG's Message JSON), and the
HTTP history routes, on the stock UI's paths (`/ui/feedback`, `/ui/user/{id}`,
`/ui/conversation/{id}`, and the admin export `/ui/get_feedback`) or graph-scoped
(`/ui/{graph}/...`, docs/graphrag-integration.md section 4)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp

from .fake_llm import GraphRAGLLM, Prompt

TURN_TIMEOUT_S = 240


@dataclass
class Turn:
    question: str
    reply: dict[str, Any]
    progress: list[str]
    prompts: list[Prompt]
    seconds: float

    def prompts_of(self, kind: str) -> list[Prompt]:
        return [p for p in self.prompts if p.kind == kind]


@dataclass
class Chat:
    user: str
    pattern: str
    conversation_id: str
    turns: list[Turn] = field(default_factory=list)


BeforeTurn = Callable[[int, Chat], Awaitable[None]]


async def chat(
    base_url: str,
    graph: str,
    user: tuple[str, str],
    llm: GraphRAGLLM,
    questions: list[str],
    *,
    pattern: str = "hybridsearch",
    conversation_id: str = "new",
    before_turn: BeforeTurn | None = None,
) -> Chat:
    """One websocket session: the stock UI's opening frames, then `questions` in turn."""
    ws_url = base_url.replace("http://", "ws://") + f"/ui/{graph}/chat"
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url) as ws:
        await ws.send_str(base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode())
        await ws.send_str(pattern)
        await ws.send_str(conversation_id)
        opening = await _frame(ws)
        session_chat = Chat(user[0], pattern, str(opening["conversation_id"]))
        for i, question in enumerate(questions):
            if before_turn is not None:
                await before_turn(i, session_chat)
            mark, start = llm.mark(), time.monotonic()
            await ws.send_str(question)
            progress: list[str] = []
            while True:
                frame = await _frame(ws)
                if frame.get("response_type") == "progress":
                    progress.append(str(frame.get("content")))
                    continue
                break
            seconds = time.monotonic() - start
            session_chat.turns.append(Turn(question, frame, progress, llm.since(mark), seconds))
    return session_chat


async def _frame(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await ws.receive(timeout=TURN_TIMEOUT_S)
    if message.type != aiohttp.WSMsgType.TEXT:
        raise AssertionError(f"GraphRAG closed the chat: {message.type} {message.data!r}")
    return dict(json.loads(message.data))


@dataclass
class Answer:
    route: str
    status: int
    body: Any


class HistoryRoutes:
    """The UI's history routes of one app as one user: the stock UI's paths, or (scoped) the
    graph-scoped ones."""

    def __init__(self, base_url: str, graph: str, user: tuple[str, str], *, scoped: bool):
        self.base_url, self.graph, self.user, self.scoped = base_url, graph, user, scoped

    async def _call(self, method: str, path: str, body: Any = None) -> Answer:
        token = base64.b64encode(f"{self.user[0]}:{self.user[1]}".encode()).decode()
        headers = {"Authorization": f"Basic {token}"}
        async with (
            aiohttp.ClientSession(headers=headers) as session,
            session.request(method, self.base_url + path, json=body) as reply,
        ):
            text = await reply.text()
            try:
                parsed: Any = json.loads(text)
            except json.JSONDecodeError:
                parsed = text
            return Answer(f"{method} {path}", reply.status, parsed)

    async def feedback(self, message: dict[str, Any], feedback: int, comment: str) -> Answer:
        path = f"/ui/{self.graph}/feedback" if self.scoped else "/ui/feedback"
        return await self._call("POST", path, {**message, "feedback": feedback, "comment": comment})

    async def conversations(self) -> Answer:
        path = f"/ui/{self.graph}/user" if self.scoped else f"/ui/user/{self.user[0]}"
        return await self._call("GET", path)

    async def query(self, question: str, conversation_id: str) -> Answer:
        """GraphRAG's HTTP chat route, `GET /ui/{graph}/query` (routers/ui.py graph_query):
        one question, the reply Message as a JSON string."""
        q = urlencode({"q": question, "conversation_id": conversation_id})
        return await self._call("GET", f"/ui/{self.graph}/query?{q}")

    async def feedback_export(self) -> Answer:
        """The feedback export (`get_feedback`): the caller's own messages unless an admin."""
        scope = f"/{self.graph}" if self.scoped else ""
        return await self._call("GET", f"/ui{scope}/get_feedback")

    async def conversation(self, conversation_id: str) -> Answer:
        scope = f"/{self.graph}" if self.scoped else ""
        return await self._call("GET", f"/ui{scope}/conversation/{conversation_id}")

"""GraphRAG's chat-history service (chat-history/, Go, at cc4eed1) as a loopback stand-in, for
the STOCK run: stock GraphRAG writes each turn there and its UI routes proxy to it.

Its REST surface as GraphRAG uses it (chat-history/routes/routes.go, db/db.go,
structs/structs.go): `POST /conversation` upserts one Message (by message_id; a new
conversation id creates the conversation) and answers the conversation; `GET /user/{id}`
lists that user's conversations (403 for someone else's id); `GET /conversation/{id}` answers
a LIST of the caller's messages of that conversation (`[]` when it is not theirs);
`GET /get_feedback` answers a non-admin caller's own messages. Users come
from HTTP Basic credentials, trusted as chat-history trusts them."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_FIELDS = (
    "conversation_id",
    "message_id",
    "parent_id",
    "model",
    "content",
    "role",
    "response_time",
    "feedback",
    "comment",
)


@dataclass
class ChatHistory:
    port: int = 0
    conversations: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)  # by message_id
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def upsert(self, user: str, m: dict[str, Any]) -> dict[str, Any]:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        cid = str(m.get("conversation_id"))
        convo = self.conversations.get(cid)
        if convo is None:
            convo = {"user_id": user, "conversation_id": cid, "name": "", "create_ts": now}
            self.conversations[cid] = convo
        convo["update_ts"] = now
        row = self.messages.get(str(m.get("message_id")), {"create_ts": now})
        row.update({k: m.get(k) for k in _FIELDS})
        row["feedback"] = int(row.get("feedback") or 0)
        row["comment"] = row.get("comment") or ""
        row["update_ts"] = now
        self.messages[str(m.get("message_id"))] = row
        return convo


def _handler(state: ChatHistory) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _user(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Basic "):
                return None
            return base64.b64decode(auth[6:]).decode().partition(":")[0]

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            with state.lock:
                state.requests.append((method, self.path))
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            user = self._user()
            if user is None:
                self._send(401, {"reason": "missing Authorization header"})
                return
            with state.lock:
                if method == "POST" and self.path == "/conversation":
                    self._send(200, state.upsert(user, json.loads(raw)))
                elif method == "GET" and self.path.startswith("/user/"):
                    wanted = self.path.split("/", 2)[2]
                    if wanted != user:
                        reason = f"{user} is not authorized to retrieve conversations for {wanted}"
                        self._send(403, {"reason": reason})
                        return
                    mine = [c for c in state.conversations.values() if c["user_id"] == user]
                    self._send(200, mine)
                elif method == "GET" and self.path == "/get_feedback":
                    # what chat-history answers a caller without an admin role: every
                    # message of their own conversations (routes.go GetFeedback)
                    own = {c for c, v in state.conversations.items() if v["user_id"] == user}
                    rows = [m for m in state.messages.values() if m["conversation_id"] in own]
                    self._send(200, rows)
                elif method == "GET" and self.path.startswith("/conversation/"):
                    cid = self.path.split("/", 2)[2].split("?")[0]
                    convo = state.conversations.get(cid)
                    rows = [m for m in state.messages.values() if m["conversation_id"] == cid]
                    self._send(200, rows if convo and convo["user_id"] == user else [])
                else:
                    self._send(404, {"reason": "not found"})

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler


@contextmanager
def serve_chat_history() -> Iterator[ChatHistory]:
    state = ChatHistory()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

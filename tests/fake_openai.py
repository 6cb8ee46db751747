"""A fake OpenAI-compatible endpoint on loopback that speaks the real wire protocol
(POST /v1/chat/completions → chat.completion JSON), for summarizer and extractor tests."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar


@dataclass
class _Loopback:
    """A fake endpoint's port, what it was asked, and the event that ends its waits."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@dataclass
class FakeLLM(_Loopback):
    """What the fake endpoint answers and what it was asked."""

    mode: str = "ok"  # ok | status500 | garbage | empty | slow | drip
    reply: str = "The user is porting a billing engine to Postgres."
    # Optional: the reply content for a request body (overrides `reply`), for endpoints that
    # serve several callers, e.g. the summarizer, the extractor and the reconciler.
    responder: Callable[[dict[str, Any]], str] | None = None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the timeout test) is not an error here


class _JsonHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


_F = TypeVar("_F", bound=_Loopback)


@contextmanager
def _serve(state: _F, handler: type[BaseHTTPRequestHandler]) -> Iterator[_F]:
    """Serves `handler` on a free loopback port for the duration of the block."""
    server = _QuietServer(("127.0.0.1", 0), handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def _handler(state: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(_JsonHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = json.loads(raw)
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            if state.mode == "slow":
                state.release.wait(10)
            if state.mode == "drip":  # a byte at a time: no single read ever times out
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                while not state.release.wait(0.05):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            elif state.mode == "status500":
                # An error body that echoes the prompt: it must never reach the log.
                self._send(500, json.dumps({"error": {"message": raw.decode()}}).encode())
            elif state.mode == "garbage":
                self._send(200, b"<html>not json{{")
            else:
                content = "" if state.mode == "empty" else state.reply
                if state.responder is not None and state.mode == "ok":
                    content = state.responder(body)
                completion = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1700000000,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
                self._send(200, json.dumps(completion).encode())

    return Handler


@contextmanager
def serve_fake_llm() -> Iterator[FakeLLM]:
    state = FakeLLM()
    with _serve(state, _handler(state)):
        yield state


# --- /v1/embeddings -----------------------------------------------------------------------


def fake_vector(text: str, dimension: int = 4) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [digest[i] - 127.5 for i in range(dimension)]
    norm = math.hypot(*raw)
    return [x / norm for x in raw]


@dataclass
class FakeEmbeddings(_Loopback):
    mode: str = "ok"  # ok | status500 | status429 | status401 | wrongdim | slow
    dimension: int = 6


def raw_vector(text: str, dimension: int) -> list[float]:
    """Deliberately not unit length."""
    return [3.0 * x for x in fake_vector(text, dimension)]


def _embeddings_handler(state: FakeEmbeddings) -> type[BaseHTTPRequestHandler]:
    class Handler(_JsonHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = json.loads(raw)
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            if self.path != "/v1/embeddings":
                self._send(404, b'{"error": {"message": "no such route"}}')
            elif state.mode == "slow":
                state.release.wait(10)
                self._send(503, b"{}")
            elif state.mode.startswith("status"):
                # An error body that echoes the input: it must never reach an error or the log.
                self._send(int(state.mode[6:]), json.dumps({"error": {"message": body}}).encode())
            else:
                dimension = state.dimension + (1 if state.mode == "wrongdim" else 0)
                data = [
                    {"object": "embedding", "index": i, "embedding": raw_vector(t, dimension)}
                    for i, t in enumerate(body["input"])
                ]
                data.reverse()  # the index decides the order, not the position
                answer = {
                    "object": "list",
                    "data": data,
                    "model": body["model"],
                    "usage": {"prompt_tokens": 8, "total_tokens": 8},
                }
                self._send(200, json.dumps(answer).encode())

    return Handler


@contextmanager
def serve_fake_embeddings() -> Iterator[FakeEmbeddings]:
    state = FakeEmbeddings()
    with _serve(state, _embeddings_handler(state)):
        yield state


# --- any path, answers scripted one request at a time ---------------------------------------


@dataclass
class Answer:
    """One scripted answer: a status, headers and body, or a connection closed unanswered."""

    status: int = 200
    body: bytes = b'{"ok": true}'
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # close the connection without answering
    wait: bool = False  # answer only when released (or after 10 s)


@dataclass
class FakeScripted(_Loopback):
    """Answers request n with `answers[n]` (the last one again once they run out)."""

    answers: list[Answer] = field(default_factory=lambda: [Answer()])


def _scripted_handler(state: FakeScripted) -> type[BaseHTTPRequestHandler]:
    class Handler(_JsonHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": raw})
            answer = state.answers[min(len(state.requests), len(state.answers)) - 1]
            if answer.wait:
                state.release.wait(10)
            if answer.drop:
                self.close_connection = True
                return
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

    return Handler


@contextmanager
def serve_scripted(*answers: Answer) -> Iterator[FakeScripted]:
    state = FakeScripted(answers=list(answers) or [Answer()])
    with _serve(state, _scripted_handler(state)):
        yield state

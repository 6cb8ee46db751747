"""Pieces shared by the LLM-backed extraction adapters (mem0_extractor, llm_reconciler).

* An OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`), async for
  the reconciler and sync for mem0's worker thread. Each call makes exactly one request (no
  retries), is bounded by one overall deadline (a server that drips its answer a byte at a time
  is cut off too), and reads at most `MAX_RESPONSE_BYTES`. Every failure is a `ChatError` whose
  message is ours (a status code, "timed out", an exception type), never the endpoint's text or
  the prompt, so it is safe to log.
* Lexical helpers that choose which stored facts a prompt shows when there are too many:
  content words, and the texts sharing most of them with the turn.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx

from memory_server.memory.reconcile import normalise

MAX_RESPONSE_BYTES = 1 << 20


class ChatError(Exception):
    """The chat call failed. The message never holds the endpoint's or the prompt's text."""


def chat_request(
    model: str,
    messages: Sequence[dict[str, str]],
    *,
    json_mode: bool,
    max_tokens: int,
    temperature: float = 0.0,
) -> dict[str, Any]:
    """The chat-completions request body; `json_mode` adds `response_format: json_object`
    (OpenAI, vLLM, llama.cpp server and Ollama accept it; switch it off for endpoints that
    reject the field)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def completion_text(status: int, body: bytes) -> str:
    """`choices[0].message.content` of a chat.completion response, stripped."""
    if not 200 <= status < 300:
        raise ChatError(f"HTTP {status}")
    try:
        payload = json.loads(body)
    except ValueError:
        raise ChatError("response is not JSON") from None
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ChatError("no choices[0].message.content") from None
    if not isinstance(content, str) or not content.strip():
        raise ChatError("empty content")
    return content.strip()


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


class _Endpoint:
    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self._headers = _headers(api_key)


class AsyncChatClient(_Endpoint):
    """One request per `complete`, bounded by `timeout_s` in all (connect, send, every byte)."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        super().__init__(base_url, model, api_key, timeout_s)
        self._client: httpx.AsyncClient | None = None

    async def complete(
        self, messages: Sequence[dict[str, str]], *, json_mode: bool, max_tokens: int
    ) -> str:
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers=self._headers, timeout=httpx.Timeout(self.timeout_s)
            )
        body = chat_request(self.model, messages, json_mode=json_mode, max_tokens=max_tokens)
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream("POST", self.url, json=body) as response:
                    raw = bytearray()
                    async for chunk in response.aiter_bytes():
                        raw += chunk
                        if len(raw) > MAX_RESPONSE_BYTES:
                            raise ChatError("response too large")
        except TimeoutError:
            raise ChatError(f"timed out after {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise ChatError(type(exc).__name__) from None
        return completion_text(response.status_code, bytes(raw))

    async def close(self) -> None:
        """Idempotent."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class SyncChatClient(_Endpoint):
    """For code that must call the model from a worker thread (mem0 is synchronous). Thread-safe;
    each `complete` ends by `deadline` (a `time.monotonic()` value) whatever the server does."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        super().__init__(base_url, model, api_key, timeout_s)
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool,
        max_tokens: int,
        deadline: float,
    ) -> str:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(headers=self._headers)
            client = self._client
        body = chat_request(self.model, messages, json_mode=json_mode, max_tokens=max_tokens)
        timed_out = ChatError(f"timed out after {self.timeout_s:g}s")
        left = deadline - time.monotonic()
        if left <= 0:
            raise timed_out
        try:
            # Each connect/read/write waits at most what is left; the loop below cuts off a
            # server whose bytes keep arriving just in time.
            with client.stream("POST", self.url, json=body, timeout=left) as response:
                raw = bytearray()
                for chunk in response.iter_bytes():
                    raw += chunk
                    if len(raw) > MAX_RESPONSE_BYTES:
                        raise ChatError("response too large")
                    if time.monotonic() > deadline:
                        raise timed_out
        except httpx.TimeoutException:
            raise timed_out from None
        except httpx.HTTPError as exc:
            raise ChatError(type(exc).__name__) from None
        return completion_text(response.status_code, bytes(raw))

    def close(self) -> None:
        """Idempotent."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


# --- choosing what a prompt shows --------------------------------------------------------------

_STOP_WORDS = """
    i me my we our us you your the a an to of in on for and or is are am be been it its that this
    with as at by from so please now actually really just wants want assistant user users they
    them their was were will do does did has have had there here than then also very"""
_STOP = frozenset(_STOP_WORDS.split())


def content_words(text: str) -> frozenset[str]:
    """Lower-cased content words, lightly stemmed ("prefers" = "prefer", "answers" =
    "answer"); "n't" becomes "not" so that "doesn't like" differs from "likes"."""
    words: set[str] = set()
    for token in normalise(text).split():
        word = token
        if word.endswith("n't"):
            words.add("not")
            word = word[:-3]
        word = word.removesuffix("'s")
        if not word or word in _STOP:
            continue
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        for suffix in ("ing", "ed"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        words.add(word[:-1] if len(word) > 4 and word.endswith("e") else word)
    return frozenset(words)


def most_related(texts: Sequence[str], queries: Sequence[str], limit: int) -> list[int]:
    """Indexes of at most `limit` of `texts`: those sharing the most content words with any
    query first, ties in the given order."""
    if limit <= 0:
        return []
    if len(texts) <= limit:
        return list(range(len(texts)))
    asked = [content_words(q) for q in queries]
    postings: dict[str, list[int]] = {}
    for i, q in enumerate(asked):
        for word in q:
            postings.setdefault(word, []).append(i)
    scores: list[float] = []
    for text in texts:
        mine = content_words(text)
        hits = Counter(i for word in mine for i in postings.get(word, ()))
        scores.append(max((n / len(mine) for n in hits.values()), default=0.0) if mine else 0.0)
    order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
    return order[:limit]


_SPACE_RE = re.compile(r"\s+")


def clip(text: str, max_chars: int) -> str:
    """`text` on one line, at most `max_chars` characters (an ellipsis marks a cut)."""
    text = _SPACE_RE.sub(" ", text).strip()
    return text if len(text) <= max_chars else text[: max(0, max_chars - 1)].rstrip() + "…"

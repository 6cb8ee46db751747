"""A Summarizer backed by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, ...). Whatever goes wrong with the call, the fallback summarizer answers, so a
summary is always produced."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx

from memory_server.memory.ports import Summarizer, SummaryTurn, TokenCounter

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You maintain the running summary of a conversation between a user and an assistant. "
    "Update the previous summary with the new turns. Keep durable facts, names, decisions, "
    "preferences and open questions; drop small talk. Be concise: plain sentences or short "
    "lines, no preamble. Do not invent anything that is not in the previous summary or the "
    "new turns."
)


class _BadResponse(Exception):
    """The endpoint answered, but not with a usable completion. Its text is ours, never the
    endpoint's, so it is safe to log."""


class _StatusError(_BadResponse):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class OpenAICompatibleSummarizer:
    """Summarizes with `POST {base_url}/chat/completions`; falls back on any failure."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        counter: TokenCounter,
        fallback: Summarizer,
        timeout_s: float = 30.0,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key = api_key
        self._counter = counter
        self._fallback = fallback
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return f"llm:{self._model}"

    async def start(self) -> None:
        """Open the HTTP client (idempotent). `summarize` calls it if it was not called."""
        if self._client is None:
            headers = {"Accept": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(self._timeout_s)
            )

    async def close(self) -> None:
        """Close the HTTP client (idempotent; safe before `start`)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> OpenAICompatibleSummarizer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def summarize(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if not turns:
            return self._counter.truncate(previous, max_tokens)
        try:
            text = await self._complete(previous, turns, max_tokens)
        except Exception as exc:  # any failure: the fallback answers
            # Never log the exception text of a foreign error: it may echo the conversation.
            reason = str(exc) if isinstance(exc, _BadResponse) else type(exc).__name__
            logger.warning(
                "summarizer %s failed at %s (%s); using %s",
                self.name,
                self._url,
                reason,
                self._fallback.name,
            )
            return await self._fallback.summarize(previous, turns, max_tokens)
        return self._counter.truncate(text, max_tokens)

    def request_body(
        self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int
    ) -> dict[str, Any]:
        """The chat-completions request for one fold."""
        transcript = "\n".join(f"{t.role}: {t.content}" for t in turns)
        user = (
            f"Previous summary:\n{previous.strip() or '(none yet)'}\n\n"
            f"New turns (oldest first):\n{transcript}\n\n"
            f"Write the updated summary in at most {max_tokens} tokens."
        )
        return {
            "model": self._model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": max_tokens,
        }

    async def _complete(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        await self.start()
        assert self._client is not None
        body = self.request_body(previous, turns, max_tokens)
        async with asyncio.timeout(self._timeout_s):
            response = await self._client.post(self._url, json=body)
        if not response.is_success:
            raise _StatusError(response.status_code)
        try:
            payload = response.json()
        except ValueError as exc:
            raise _BadResponse("response is not JSON") from exc
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise _BadResponse("no choices[0].message.content") from exc
        if not isinstance(content, str) or not content.strip():
            raise _BadResponse("empty content")
        return content.strip()

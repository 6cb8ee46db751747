"""A Summarizer backed by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, ...), through the shared client (memory_server.openai_http: one budget of
`timeout_s` per fold, retries of what is transient). Whatever still goes wrong, the fallback
summarizer answers, so a summary is always produced."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import MemoryServiceError
from memory_server.memory.ports import Summarizer, SummaryTurn, TokenCounter
from memory_server.openai_http import ChatClient

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You maintain the running summary of a conversation between a user and an assistant. "
    "Update the previous summary with the new turns. Keep durable facts, names, decisions, "
    "preferences and open questions; drop small talk. Be concise: plain sentences or short "
    "lines, no preamble. Do not invent anything that is not in the previous summary or the "
    "new turns."
)


class OpenAICompatibleSummarizer(Lifecycle):
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
        self._chat = ChatClient(base_url, api_key, timeout_s)
        self._model = model
        self._counter = counter
        self._fallback = fallback

    @property
    def name(self) -> str:
        return f"llm:{self._model}"

    async def start(self) -> None:
        """Open the HTTP client (idempotent). `summarize` opens it if this was not called."""
        await self._chat.start()

    async def close(self) -> None:
        """Close the HTTP client (idempotent; safe before `start`)."""
        await self._chat.close()

    async def summarize(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if not turns:
            return self._counter.truncate(previous, max_tokens)
        try:
            messages = self.messages(previous, turns, max_tokens)
            text = await self._chat.complete(self._model, messages, max_tokens=max_tokens)
        except Exception as exc:  # any failure: the fallback answers
            # Our errors' texts are safe to log; a foreign one's may echo the conversation.
            reason = str(exc) if isinstance(exc, MemoryServiceError) else type(exc).__name__
            logger.warning(
                "summarizer %s failed (%s); using %s", self.name, reason, self._fallback.name
            )
            return await self._fallback.summarize(previous, turns, max_tokens)
        return self._counter.truncate(text, max_tokens)

    def messages(
        self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int
    ) -> list[dict[str, str]]:
        """The chat messages of one fold."""
        transcript = "\n".join(f"{t.role}: {t.content}" for t in turns)
        user = (
            f"Previous summary:\n{previous.strip() or '(none yet)'}\n\n"
            f"New turns (oldest first):\n{transcript}\n\n"
            f"Write the updated summary in at most {max_tokens} tokens."
        )
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]

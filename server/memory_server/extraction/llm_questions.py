"""A QuestionSplitter that asks an OpenAI-compatible chat model (setting `ltm_split_questions`,
with `llm_base_url`): the question recall could not answer from one fact, split into the
questions it is made of, with the facts the first search found as context so that a follow-up
names what they resolve ("my manager" → "Priya Raman").

One chat-completions call per search, through the shared client (one budget of `timeout_s`,
retries of what is transient). The question is redacted before it leaves (memory.ports
SecretFilter; facts hold no secret: learning scrubs them first), every text is clipped to
`max_text_chars`, and the model answers

    {"questions": ["Who is the user's manager?", "Where does Priya Raman want to travel?"]}

validated as a whole: a list of at most `max_questions` non-empty strings. A question equal to
the one asked is dropped. Anything else (an unreachable endpoint, a timeout, an error status
left after the retries, unparseable JSON, a wrong shape) gives no questions, with a warning that
holds no user text: recall then ranks what the question found alone.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence

from memory_server.extraction.prompt_facts import clip
from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import MemoryServiceError
from memory_server.memory.ports import SecretFilter
from memory_server.openai_http import ChatClient

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = """\
You help search the long-term memory of an assistant about one user. You get a QUESTION and \
the FACTS a first search of the memory found for it. If answering the question needs facts \
that are not among them, and finding those needs a different search (the question depends on \
something a found fact names, or asks about two things), write the follow-up questions that \
would find them: each self-contained, naming people, places and things as the facts name them \
(not "my manager" but the manager's name when a fact gives it). Write at most {limit}. If the \
facts already answer the question, or one search suffices, write none.
Answer with JSON only: {{"questions": ["...", "..."]}}"""


class _Invalid(Exception):
    """The reply cannot be used. The message is ours and holds no user text."""


class LLMQuestionSplitter(Lifecycle):
    """Splits with `POST {base_url}/chat/completions`; no questions on any failure."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float,
        secrets: SecretFilter,
        *,
        max_questions: int = 3,
        max_text_chars: int = 300,
        json_mode: bool = True,
    ) -> None:
        if max_questions < 1 or max_text_chars < 16:
            raise ValueError("need max_questions >= 1 and max_text_chars >= 16")
        self._chat = ChatClient(base_url, api_key, timeout_s)
        self._model = model
        self._secrets = secrets
        self._max_questions = max_questions
        self._max_text_chars = max_text_chars
        self._json_mode = json_mode

    async def close(self) -> None:
        """Close the HTTP client (idempotent); the first call opened it."""
        await self._chat.close()

    def messages(self, question: str, known: Sequence[str]) -> list[dict[str, str]]:
        """The chat messages for `question` (already redacted) and the facts found."""
        facts = [clip(text, self._max_text_chars) for text in known]
        user = json.dumps(
            {"QUESTION": clip(question, self._max_text_chars), "FACTS": facts},
            ensure_ascii=False,
        )
        system = SYSTEM_PROMPT.format(limit=self._max_questions)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def split(self, question: str, known: Sequence[str] = ()) -> list[str]:
        # Off the loop: a pasted question may be long (the filter is CPU-bound).
        asked = (await asyncio.to_thread(self._secrets.redact, question)).text
        try:
            reply = await self._chat.complete(
                self._model,
                self.messages(asked, known),
                json_mode=self._json_mode,
                max_tokens=64 + 48 * self._max_questions,
            )
            return self._questions(reply, asked)
        except (MemoryServiceError, _Invalid) as exc:
            reason = str(exc)
        except Exception as exc:  # never let a model's reply break a search
            reason = type(exc).__name__
        logger.warning(
            "question splitter llm:%s failed (%s); searching as asked", self._model, reason
        )
        return []

    def _questions(self, reply: str, asked: str) -> list[str]:
        try:
            parsed = json.loads(reply)
        except json.JSONDecodeError:
            raise _Invalid("the reply is not JSON") from None
        found = parsed.get("questions") if isinstance(parsed, dict) else None
        if not isinstance(found, list) or len(found) > self._max_questions:
            raise _Invalid(f"expected a list of at most {self._max_questions} questions")
        if not all(isinstance(q, str) and q.strip() for q in found):
            raise _Invalid("a question that is not a non-empty string")
        same = asked.strip().casefold()
        out = [clip(q.strip(), self._max_text_chars) for q in found]
        return [q for q in dict.fromkeys(out) if q.casefold() != same]

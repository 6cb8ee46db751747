"""An Extractor that runs mem0ai 2.1.0's extraction (`Memory.add(infer=True)`) against any
OpenAI-compatible chat endpoint, with every piece of mem0's persistence replaced by nothing
(mem0_runtime) and its memories rewritten as our Candidates (mem0_wording).

What mem0 2.1.0 does in `Memory.add(messages, infer=True)` (mem0/memory/main.py,
`_add_to_vector_store`), and what this adapter puts in its way:

1. `db.get_last_messages(scope)` (sqlite history) → `NoHistory` answers [] and keeps nothing
   (`save_messages`, `batch_add_history` are no-ops).
2. `embedding_model.embed(transcript)` then `vector_store.search(top_k=10)` → "Existing
   Memories" in the prompt, under ids "0", "1", ... (never the stores' ids). The store is built
   per call (`TurnStore`) and holds only the turn's `recalled` texts most related to the user's
   words, so the model sees what is already known and does not extract it again.
3. ONE chat call: system prompt `ADDITIVE_EXTRACTION_PROMPT` (~8k tokens), user prompt from
   `generate_additive_extraction_prompt` with our `custom_instructions` (durable user facts only,
   written "User prefers ..."), `response_format={"type": "json_object"}`. The reply is
   `{"memory": [{"id": "0", "text": "...", "attributed_to": "user", ...}]}`. mem0 only ever
   ADDs; we reconcile ourselves. mem0 treats unparseable JSON as "no memories"; our LLM adapter
   checks the reply first and fails the call instead (→ Unavailable, the caller falls back).
4. `embed_batch(texts)` and an md5 check against the existing rows (exact duplicates dropped),
   then `vector_store.insert(payloads)`: each payload keeps `data` (the text) and
   `attributed_to`, which is how the texts come back to us (the return value of `add` drops
   `attributed_to`).
5. spaCy lemmatisation and entity linking into `entity_store`: switched off (mem0_runtime).

So mem0 never needs real vectors here: the search result is decided by us and the inserted
vectors are thrown away, so no embedding call is made. mem0's own LLM classes are not used
either, so `OPENROUTER_API_KEY` and `OPENAI_*` variables have no effect: its one chat call goes
through our `ChatClient` (memory_server.openai_http), with its budget, retries and errors.

`Memory.add` is synchronous: it runs in a worker thread, and its chat call is handed back to
the event loop (`run_coroutine_threadsafe`), where the client lives, bounded by the same
deadline as the `asyncio.timeout` around the thread (so a timed-out thread ends soon after).
Any failure of the call is `Unavailable`. A new `TurnMemory` per call: nothing is shared
between concurrent extractions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time

from memory_server.extraction.mem0_runtime import load_mem0, mem0_loaded
from memory_server.extraction.mem0_wording import Found, fact_kind, third_person, to_candidates
from memory_server.extraction.prompt_facts import most_related
from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import MemoryServiceError, Unavailable
from memory_server.memory.facts.model import Candidate
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.ports import Embedder, ExtractionInput
from memory_server.openai_http import ChatClient, EndpointError

__all__ = ["INSTRUCTIONS", "Mem0Extractor", "fact_kind", "third_person"]

INSTRUCTIONS = """\
Store only durable facts about the user that will still matter in later conversations: \
preferences (including how the assistant should answer: language, length, format, tone), \
decisions, goals and ongoing projects, and identity (name, role, employer, team, location, \
timezone, languages). Skip one-off requests about this conversation, questions, hypotheticals, \
other people's opinions, and information the assistant provided. Write each memory as one short \
sentence that starts with "User", for example "User prefers concise bullet points", "User wants \
the assistant to always answer in French", "User decided to use TigerGraph", "User is building a \
fraud-detection graph", "User's timezone is CET". Add no dates the user did not give. When the \
user withdraws something, write "User no longer <the fact>"."""


class Mem0Extractor(Lifecycle):
    """Extractor on mem0ai's one-call additive extraction (see the module doc)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        embedder: Embedder,
        timeout_s: float = 30.0,
        *,
        json_mode: bool = True,
        max_tokens: int = 2000,
        max_input_chars: int = 12000,
        max_shown_recalled: int = 10,
    ) -> None:
        self._chat = ChatClient(base_url, api_key, timeout_s)
        self._model = model
        self._embedder = embedder
        self._timeout_s = timeout_s
        self._json_mode = json_mode
        self._max_tokens = max_tokens
        self._max_input_chars = max_input_chars
        self._max_shown = max_shown_recalled
        self._rules = RuleExtractor()

    @property
    def name(self) -> str:
        return f"mem0:{self._model}"

    async def start(self) -> None:
        """Import mem0 now, in a worker thread (about a second; otherwise the first `extract`
        does it, outside its time bound). Raises Unavailable when mem0ai is not installed."""
        if not mem0_loaded():
            await asyncio.to_thread(load_mem0)

    async def close(self) -> None:
        """Close the HTTP client (idempotent)."""
        await self._chat.close()

    async def extract(self, turn: ExtractionInput) -> list[Candidate]:
        if not turn.user_text.strip():
            return []
        await self.start()
        messages = [{"role": "user", "content": turn.user_text[: self._max_input_chars]}]
        if turn.assistant_text.strip():
            content = turn.assistant_text[: self._max_input_chars]
            messages.append({"role": "assistant", "content": content})
        recalled = [t for t in turn.recalled if t.strip()]
        shown = [recalled[i] for i in most_related(recalled, [turn.user_text], self._max_shown)]
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self._timeout_s
        try:
            async with asyncio.timeout(self._timeout_s):
                found = await asyncio.to_thread(self._add, messages, shown, loop, deadline)
        except TimeoutError:
            raise Unavailable(f"{self.name}: timed out after {self._timeout_s:g}s") from None
        except MemoryServiceError as exc:
            raise Unavailable(f"{self.name}: {exc}") from None
        return to_candidates(found, turn, self._rules)

    def _add(
        self,
        messages: list[dict[str, str]],
        shown: list[str],
        loop: asyncio.AbstractEventLoop,
        deadline: float,
    ) -> list[Found]:
        """mem0's `add`, in a worker thread: what it extracted, in order."""
        mem0 = load_mem0()

        def ask(chat: list[dict[str, str]], json_mode: bool) -> str:
            return self._ask(loop, deadline, chat, json_mode)

        store = mem0.store_class(shown)
        llm = mem0.llm_class(ask, self._model, self._json_mode, self._max_tokens)
        embedding = mem0.embedding_class(self._embedder.dimension)
        memory = mem0.memory_class(mem0.config, llm, embedding, store, INSTRUCTIONS)
        try:
            memory.add(messages, user_id="user", infer=True)
        except Exception as exc:
            cause = exc if isinstance(exc, MemoryServiceError) else exc.__cause__
            if isinstance(cause, MemoryServiceError):
                raise cause from None
            raise EndpointError(f"mem0 failed ({type(exc).__name__})") from None
        found: list[Found] = []
        for row in store.inserted:
            text, by = row.payload.get("data"), row.payload.get("attributed_to")
            if isinstance(text, str) and text.strip():
                found.append(Found(text, by if isinstance(by, str) else None))
        return found

    def _ask(
        self,
        loop: asyncio.AbstractEventLoop,
        deadline: float,
        messages: list[dict[str, str]],
        json_mode: bool,
    ) -> str:
        """mem0's chat call, from its thread: run on the loop, by `deadline` whatever happens
        there (a loop that stopped leaves this thread no reason to wait)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unavailable(f"{self.name}: timed out after {self._timeout_s:g}s")
        call = self._chat.complete(
            self._model, messages, max_tokens=self._max_tokens, json_mode=json_mode, budget_s=left
        )
        future = asyncio.run_coroutine_threadsafe(call, loop)
        try:
            return future.result(timeout=left + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise Unavailable(f"{self.name}: timed out after {self._timeout_s:g}s") from None

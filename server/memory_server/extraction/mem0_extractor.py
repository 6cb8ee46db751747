"""An Extractor that runs mem0ai 2.1.0's extraction (`Memory.add(infer=True)`) against any
OpenAI-compatible chat endpoint, with every piece of mem0's persistence replaced by nothing.

What mem0 2.1.0 does in `Memory.add(messages, infer=True)` (mem0/memory/main.py,
`_add_to_vector_store`), and what this module puts in its way:

1. `db.get_last_messages(scope)` (sqlite history) → `_NoHistory` answers [] and keeps nothing
   (`save_messages`, `batch_add_history` are no-ops).
2. `embedding_model.embed(transcript)` then `vector_store.search(top_k=10)` → "Existing
   Memories" in the prompt, under ids "0", "1", ... (never the stores' ids). The store is built
   per call (`_TurnStore`) and holds only the turn's `recalled` texts most related to the user's
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
5. spaCy lemmatisation and entity linking into `entity_store`: we mark mem0's spaCy loader as
   failed, so neither runs (without that, an installed spaCy lacking its model would make mem0
   try to *download* en_core_web_sm at run time).

So mem0 never needs real vectors here: the search result is decided by us and the inserted
vectors are thrown away. The embedder adapter returns one constant unit vector of the
embedder's dimension; no embedding call is made and nothing has to cross back to the event loop.

`Memory.__init__` is never called (it would build qdrant at /tmp/qdrant, sqlite at
~/.mem0/history.db and, with telemetry on, PostHog); `_TurnMemory` sets the attributes it would
set, including `_entity_store` (left None, mem0 would build a qdrant store on first use).
mem0 is imported lazily, in a worker thread, with `MEM0_TELEMETRY=False` (read at import time)
and `MEM0_DIR` pointing at a throwaway directory (the import writes `config.json` with an
anonymous id there; the directory is removed at exit). mem0's own LLM classes are not used, so
`OPENROUTER_API_KEY` and `OPENAI_*` variables have no effect. mem0's logger is set to CRITICAL:
its warnings and debug lines may quote memory texts, and its errors (a failed LLM call) reach
the caller as Unavailable anyway.

`Memory.add` is synchronous: it runs in a worker thread, with its one HTTP call bounded by the
same deadline as the `asyncio.timeout` around it (so a timed-out thread ends soon after). Any
failure of the call is `Unavailable`. A new `_TurnMemory` per call: nothing is shared between
concurrent extractions.

mem0's memories become Candidates: only those attributed to the user (assistant-sourced ones
such as "User was recommended X" are dropped), rewritten to the rule extractor's third-person
style ("User prefers X" → "Prefers X", "User's timezone is CET" → "Timezone is CET"), with a
kind from `fact_kind`, `change` when the memory or the user's sentence it came from announces a
change, and facts that repeat a recalled text left out. mem0 cannot express a retraction: a
"User no longer likes jazz" memory becomes a retraction of "Likes jazz", other negations of the
past are dropped (they would pile up beside the fact they negate), and the rule extractor's
retractions of the user's own words ("forget that I ...") are added.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from memory_server.extraction.llm_client import (
    ChatError,
    SyncChatClient,
    content_words,
    most_related,
)
from memory_server.memory.errors import Unavailable
from memory_server.memory.extract import RuleExtractor
from memory_server.memory.facts import Candidate, FactKind
from memory_server.memory.ports import Embedder, ExtractionInput
from memory_server.memory.reconcile import normalise

logger = logging.getLogger(__name__)

MEM0_SERIES = "2.1."  # the internals this adapter relies on are those of mem0ai 2.1.x

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

_MAX_CANDIDATES = 20
_MAX_FACT_CHARS = 400


@dataclass(frozen=True, slots=True)
class _Found:
    text: str
    attributed_to: str | None


@dataclass(slots=True)
class _Row:
    """What mem0 expects from a vector store hit (`id`, `score`, `payload`)."""

    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


class _NoHistory:
    """Duck-types mem0's `SQLiteManager` (mem0/memory/storage.py): remembers nothing."""

    def add_history(self, *args: Any, **kwargs: Any) -> None:
        pass

    def batch_add_history(self, records: Any) -> None:
        pass

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        return []

    def save_messages(self, messages: Any, session_scope: str) -> None:
        pass

    def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
        return []

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Mem0:
    """mem0's classes, bound once after the lazy import."""

    version: str
    memory_class: Any
    store_class: Any
    llm_class: Any
    embedding_class: Any
    config: Any


_LOAD_LOCK = threading.Lock()
_LOADED: _Mem0 | Unavailable | None = None


def _load_mem0() -> _Mem0:
    """Import mem0 once per process (in the caller's thread: it takes about a second). Not
    installed, or another series: Unavailable, every time."""
    global _LOADED
    with _LOAD_LOCK:
        if _LOADED is None:
            try:
                _LOADED = _import_mem0()
            except Unavailable as exc:
                _LOADED = exc
        if isinstance(_LOADED, Unavailable):
            raise Unavailable(str(_LOADED))
        return _LOADED


def _import_mem0() -> _Mem0:
    if sys.modules.get("mem0") is None:
        os.environ["MEM0_TELEMETRY"] = "False"  # read once, at import time
        scratch = tempfile.mkdtemp(prefix="mem0-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        previous = os.environ.get("MEM0_DIR")
        os.environ["MEM0_DIR"] = scratch
        try:
            mem0 = importlib.import_module("mem0")
        except ImportError:
            raise Unavailable(
                "mem0ai is not installed (pip install 'graphrag-memory[mem0]')"
            ) from None
        finally:
            if previous is None:
                os.environ.pop("MEM0_DIR", None)
            else:
                os.environ["MEM0_DIR"] = previous
    else:
        mem0 = sys.modules["mem0"]
    version = str(getattr(mem0, "__version__", "?"))
    if not version.startswith(MEM0_SERIES):
        raise Unavailable(f"mem0ai {version} is installed; this adapter needs {MEM0_SERIES}x")
    main = importlib.import_module("mem0.memory.main")
    telemetry = importlib.import_module("mem0.memory.telemetry")
    # Belt and braces, for a process that imported mem0 before us: capture_event and the
    # notices read these module globals on every call.
    setattr(telemetry, "MEM0_TELEMETRY", False)  # noqa: B010
    setattr(main, "MEM0_TELEMETRY", False)  # noqa: B010
    spacy_models = importlib.import_module("mem0.utils.spacy_models")
    setattr(spacy_models, "_load_failed_full", True)  # noqa: B010 (no entities, no download)
    setattr(spacy_models, "_load_failed_lemma", True)  # noqa: B010 (BM25 lemmas: unused here)
    logging.getLogger("mem0").setLevel(logging.CRITICAL)
    return _bind(version, main)


def _bind(version: str, main: Any) -> _Mem0:
    embedding_base = importlib.import_module("mem0.embeddings.base").EmbeddingBase
    llm_base = importlib.import_module("mem0.llms.base").LLMBase
    store_base = importlib.import_module("mem0.vector_stores.base").VectorStoreBase
    utils = importlib.import_module("mem0.memory.utils")
    config_module = importlib.import_module("mem0.configs.base")

    class FlatEmbedding(embedding_base):  # type: ignore[misc,valid-type]
        """One constant unit vector for every text: mem0 needs vectors, not their meaning."""

        def __init__(self, dims: int) -> None:
            super().__init__()
            self.config.embedding_dims = dims
            self._vector = [1.0 / dims**0.5] * dims

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return list(self._vector)

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return [list(self._vector) for _ in texts]

    class ChatLLM(llm_base):  # type: ignore[misc,valid-type]
        """mem0's one extraction call, through our bounded client; the reply is checked here
        because mem0 would read a broken one as "no memories"."""

        def __init__(
            self, client: SyncChatClient, deadline: float, json_mode: bool, max_tokens: int
        ) -> None:
            super().__init__({"model": client.model, "temperature": 0.0, "max_tokens": max_tokens})
            self._client = client
            self._deadline = deadline
            self._json_mode = json_mode
            self._max_tokens = max_tokens

        def generate_response(
            self,
            messages: list[dict[str, str]],
            tools: Any = None,
            tool_choice: str = "auto",
            **kwargs: Any,
        ) -> str:
            json_mode = self._json_mode and kwargs.get("response_format") is not None
            reply = self._client.complete(
                messages, json_mode=json_mode, max_tokens=self._max_tokens, deadline=self._deadline
            )
            text = utils.remove_code_blocks(reply)
            try:
                parsed = json.loads(text, strict=False)
            except ValueError:
                try:
                    parsed = json.loads(utils.extract_json(text), strict=False)
                except ValueError:
                    raise ChatError("reply is not JSON") from None
            if not isinstance(parsed, dict) or not isinstance(parsed.get("memory", []), list):
                raise ChatError('reply is not {"memory": [...]}')
            return reply

    class TurnStore(store_base):  # type: ignore[misc,valid-type]
        """The vector store of one `add`: the recalled facts shown to mem0, then what it
        inserts. Dropped with the call."""

        def __init__(self, seeded: Sequence[str]) -> None:
            self.rows: dict[str, _Row] = {}
            self.inserted: list[_Row] = []
            for i, text in enumerate(seeded):
                digest = hashlib.md5(text.encode()).hexdigest()
                score = max(0.0, 1.0 - i / max(1, len(seeded)))
                self.rows[f"r{i}"] = _Row(f"r{i}", score, {"data": text, "hash": digest})

        def create_col(self, name: Any, vector_size: Any, distance: Any) -> None:
            pass

        def insert(self, vectors: Any, payloads: Any = None, ids: Any = None) -> None:
            for i, _ in enumerate(vectors):
                row_id = str(ids[i]) if ids else f"n{len(self.rows)}"
                row = _Row(row_id, 1.0, dict(payloads[i]) if payloads else {})
                self.rows[row_id] = row
                self.inserted.append(row)

        def search(
            self, query: Any, vectors: Any, top_k: int = 5, filters: Any = None
        ) -> list[_Row]:
            return list(self.rows.values())[: max(0, top_k)]

        def delete(self, vector_id: Any) -> None:
            self.rows.pop(str(vector_id), None)

        def update(self, vector_id: Any, vector: Any = None, payload: Any = None) -> None:
            row = self.rows.get(str(vector_id))
            if row is not None and payload is not None:
                row.payload = dict(payload)

        def get(self, vector_id: Any) -> _Row | None:
            return self.rows.get(str(vector_id))

        def list_cols(self) -> list[str]:
            return ["turn"]

        def delete_col(self) -> None:
            self.rows.clear()

        def col_info(self) -> dict[str, Any]:
            return {"name": "turn", "count": len(self.rows)}

        def list(self, filters: Any = None, top_k: int | None = None) -> list[list[_Row]]:
            rows = list(self.rows.values())
            return [rows if top_k is None else rows[:top_k]]

        def reset(self) -> None:
            self.rows.clear()

    class TurnMemory(main.Memory):  # type: ignore[misc]
        """`Memory` without `Memory.__init__` (see the module doc)."""

        def __init__(self, config: Any, llm: Any, embedding: Any, store: Any) -> None:
            self.config = config
            self.embedding_model = embedding
            self.vector_store = store
            self.llm = llm
            self.db = _NoHistory()
            self.collection_name = "turn"
            self.api_version = config.version
            self.custom_instructions = INSTRUCTIONS
            self.reranker = None
            self._entity_store = TurnStore(())

    return _Mem0(
        version=version,
        memory_class=TurnMemory,
        store_class=TurnStore,
        llm_class=ChatLLM,
        embedding_class=FlatEmbedding,
        config=config_module.MemoryConfig(),
    )


class Mem0Extractor:
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
        self._client = SyncChatClient(base_url, model, api_key, timeout_s)
        self._embedder = embedder
        self._timeout_s = timeout_s
        self._json_mode = json_mode
        self._max_tokens = max_tokens
        self._max_input_chars = max_input_chars
        self._max_shown = max_shown_recalled
        self._rules = RuleExtractor()

    @property
    def name(self) -> str:
        return f"mem0:{self._client.model}"

    async def start(self) -> None:
        """Import mem0 now, in a worker thread (about a second; otherwise the first `extract`
        does it, outside its time bound). Raises Unavailable when mem0ai is not installed."""
        if not isinstance(_LOADED, _Mem0):
            await asyncio.to_thread(_load_mem0)

    async def close(self) -> None:
        """Close the HTTP client (idempotent)."""
        await asyncio.to_thread(self._client.close)

    async def __aenter__(self) -> Mem0Extractor:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

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
        deadline = time.monotonic() + self._timeout_s
        try:
            async with asyncio.timeout(self._timeout_s):
                found = await asyncio.to_thread(self._add, messages, shown, deadline)
        except TimeoutError:
            raise Unavailable(f"{self.name}: timed out after {self._timeout_s:g}s") from None
        except ChatError as exc:
            raise Unavailable(f"{self.name}: {exc}") from None
        return self._candidates(found, turn)

    def _add(
        self, messages: list[dict[str, str]], shown: list[str], deadline: float
    ) -> list[_Found]:
        """mem0's `add`, in a worker thread: what it extracted, in order."""
        mem0 = _load_mem0()
        store = mem0.store_class(shown)
        llm = mem0.llm_class(self._client, deadline, self._json_mode, self._max_tokens)
        memory = mem0.memory_class(
            mem0.config, llm, mem0.embedding_class(self._embedder.dimension), store
        )
        try:
            memory.add(messages, user_id="user", infer=True)
        except Exception as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, ChatError) else exc
            if isinstance(cause, ChatError):
                raise cause from None
            raise ChatError(f"mem0 failed ({type(exc).__name__})") from None
        found: list[_Found] = []
        for row in store.inserted:
            text, by = row.payload.get("data"), row.payload.get("attributed_to")
            if isinstance(text, str) and text.strip():
                found.append(_Found(text, by if isinstance(by, str) else None))
        return found

    def _candidates(self, found: Sequence[_Found], turn: ExtractionInput) -> list[Candidate]:
        """mem0's memories as Candidates (see the module doc), then the rule extractor's
        retractions."""
        recalled = _Recalled(turn.recalled)
        sentences = _Sentences(turn.user_text)
        out: list[Candidate] = []
        for item in found:
            if item.attributed_to not in (None, "", "user") or _FROM_ASSISTANT_RE.search(item.text):
                continue
            text = third_person(item.text)
            if not text or len(text) > _MAX_FACT_CHARS:
                continue
            change = bool(_CHANGE_RE.search(item.text)) or sentences.announces_change(item.text)
            retracted = _retracted(text)
            if retracted is not None:
                out.append(
                    Candidate(retracted, fact_kind(retracted), retraction=True, change=change)
                )
            elif not _NEGATED_PAST_RE.search(text) and not recalled.repeats(text):
                out.append(Candidate(text, fact_kind(text), change=change))
        out.extend(c for c in self._rules.extract_sync(turn) if c.retraction)
        return _unique(out)[:_MAX_CANDIDATES]


# --- from mem0's wording to ours ---------------------------------------------------------------

_FROM_ASSISTANT_RE = re.compile(
    r"^(?:the )?user (?:was|were|got|has been) (?:recommended|suggested|advised|told|given|"
    r"shown|sent|offered|provided|reminded)\b|\bthe assistant (?:recommended|suggested|"
    r"provided|explained|created|proposed|offered)\b",
    re.IGNORECASE,
)
_SUBJECT_RE = re.compile(r"^(?:the )?user(?P<own>['’]s)?\s+(?:(?:now|currently)\s+)?", re.I)
_CHANGE_RE = re.compile(
    r"\b(?:actually|instead|anymore|any more|any longer|no longer|changed (?:my|their|his|her) "
    r"mind|change of plans?|switch(?:ed|ing)? (?:to|from)|nowadays|these days)\b|"
    r"(?<!from )(?<!right )(?<!for )\bnow\b(?! on)",
    re.IGNORECASE,
)
_RETRACTED_RES = [
    (re.compile(r"^no longer (?P<rest>.+)$", re.I), "{rest}"),
    (re.compile(r"^is no longer (?P<rest>.+)$", re.I), "Is {rest}"),
    (re.compile(r"^is not (?P<rest>.+?),? (?:anymore|any more|any longer)$", re.I), "Is {rest}"),
    (
        re.compile(
            r"^(?:does not|doesn't) (?P<verb>[a-z]+) (?P<rest>.+?),? (?:anymore|any more|"
            r"any longer)$",
            re.I,
        ),
        "{verb} {rest}",
    ),
]
# A negation of the past that is not one of the forms above: as a fact it would only pile up
# beside the fact it negates, and the user's own retraction is left to the rules.
_NEGATED_PAST_RE = re.compile(
    r"\b(?:no longer|anymore|any more|any longer|forget|forgot|stopped|used to)\b", re.I
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def third_person(text: str) -> str:
    """mem0's "User prefers X." as the rule extractor writes it: "Prefers X"; "User's
    timezone is CET" → "Timezone is CET". Text without the "User" subject is kept."""
    text = re.sub(r"\s+", " ", text).strip().rstrip(".").strip()
    text = _SUBJECT_RE.sub("", text, count=1)
    return text[:1].upper() + text[1:]


def _retracted(text: str) -> str | None:
    for pattern, template in _RETRACTED_RES:
        if m := pattern.match(text):
            parts = m.groupdict()
            if "verb" in parts:
                parts["verb"] = _third(parts["verb"].lower())
            out = template.format(**parts).strip()
            return out[:1].upper() + out[1:] if out else None
    return None


def _third(verb: str) -> str:
    irregular = {"have": "has", "be": "is", "do": "does", "go": "goes"}
    if verb in irregular:
        return irregular[verb]
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


_KIND_RES: list[tuple[FactKind, re.Pattern[str]]] = [
    (
        FactKind.IDENTITY,
        re.compile(r"^(?:wants to be called|goes by|(?:full |first |last )?name is|is called)\b"),
    ),
    (
        FactKind.PREFERENCE,
        re.compile(
            r"^(?:prefers|likes|loves|enjoys|hates|dislikes|detests|avoids|(?:does not|doesn't) "
            r"(?:like|want|enjoy)|can't stand|cannot stand|is (?:not )?(?:a )?(?:big |huge )?"
            r"fan of|wants (?:the assistant|answers|responses|replies|explanations|code|"
            r"examples|output)|would (?:rather|like the assistant)|(?:favou?rite|preferred|"
            r"default|usual|go-to) [\w' -]+ (?:is|are))\b"
        ),
    ),
    (
        FactKind.DECISION,
        re.compile(
            r"^(?:(?:has )?(?:decided|chosen|chose|picked|selected|settled on|opted|committed|"
            r"switched|moved|migrated|adopted|standardi[sz]ed)|is (?:switching|moving|"
            r"migrating) to|will (?:use|go with|stick with|switch to|adopt|migrate to|move to|"
            r"standardi[sz]e on))\b"
        ),
    ),
    (
        FactKind.GOAL,
        re.compile(
            r"^(?:is (?:working on|building|developing|learning|studying|trying to|planning|"
            r"hoping to|preparing|aiming to|writing|creating|designing|migrating|setting up)|"
            r"wants to|plans to|hopes to|intends to|aims to|is going to|(?:main |current |"
            r"primary )?(?:goal|goals|objective|aim|focus|mission|project)s? (?:is|are))\b"
        ),
    ),
    (
        FactKind.IDENTITY,
        re.compile(
            r"^(?:is (?:a|an|the)|works|worked|lives|is based|is from|is located|speaks|"
            r"is on the|is in the|is part of|has worked|has been (?:a|an|working)|"
            r"(?:native |spoken )?(?:role|job|job title|title|position|team|company|employer|"
            r"timezone|time zone|location|city|country|hometown|pronouns|language|languages|"
            r"nationality|username|handle|age|birthday|background|expertise|specialty|"
            r"seniority|level) (?:is|are))\b"
        ),
    ),
]


def fact_kind(text: str) -> FactKind:
    """The kind of a fact written in the third-person style ("Prefers ...", "Decided ...",
    "Is building ...", "Works at ..."): preference, decision, goal, identity, else other."""
    lowered = normalise(text)
    for kind, pattern in _KIND_RES:
        if pattern.match(lowered):
            return kind
    return FactKind.OTHER


class _Sentences:
    """The user's sentences, to find the one a memory came from."""

    def __init__(self, user_text: str) -> None:
        self._sentences = [s for s in _SENTENCE_RE.split(user_text) if s.strip()]
        self._words = [content_words(s) for s in self._sentences]

    def announces_change(self, memory: str) -> bool:
        mine = content_words(memory)
        if not mine or not self._sentences:
            return False
        overlap = [len(mine & words) for words in self._words]
        best = max(overlap)
        return best > 0 and bool(_CHANGE_RE.search(self._sentences[overlap.index(best)]))


class _Recalled:
    """The turn's recalled texts: a fact equal to one, or with >= 80 % of its content words in
    one, only restates it."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._keys = {normalise(t) for t in texts if t.strip()}
        self._postings: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            for word in content_words(t):
                self._postings.setdefault(word, []).append(i)

    def repeats(self, text: str) -> bool:
        if normalise(text) in self._keys:
            return True
        mine = content_words(text)
        hits = Counter(i for word in mine for i in self._postings.get(word, ()))
        return bool(mine) and any(n >= 0.8 * len(mine) for n in hits.values())


def _unique(candidates: Sequence[Candidate]) -> list[Candidate]:
    seen: set[tuple[str, bool]] = set()
    out: list[Candidate] = []
    for c in candidates:
        if (key := (normalise(c.text), c.retraction)) not in seen:
            seen.add(key)
            out.append(c)
    return out

"""The domain's view of the outside world: small Protocols that adapters implement."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from memory_server.memory.facts import (
    AppliedChange,
    Candidate,
    EventTime,
    FactVersion,
    HistoryEvent,
    LiveFact,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.identity import Scope
from memory_server.memory.model import (
    AppendOutcome,
    ContextCandidates,
    ConversationInfo,
    Feedback,
    FeedbackEntry,
    NewMessage,
    Page,
    StoredMessage,
    Summary,
)

T = TypeVar("T")
Item = TypeVar("Item")


class TokenCounter(Protocol):
    """Counts tokens the way the planner's model does (tiktoken cl100k_base)."""

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` with at most `max_tokens` tokens."""
        ...


@dataclass(frozen=True, slots=True)
class SummaryTurn:
    """One message being folded into a rolling summary."""

    role: str  # "user" | "assistant" | "system"
    content: str


class Summarizer(Protocol):
    """Folds turns into a rolling summary of at most `max_tokens` tokens."""

    @property
    def name(self) -> str:
        """Recorded with each summary (e.g. "extractive-v1", "llm:gpt-4o-mini")."""
        ...

    async def summarize(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        """Return the new summary covering `previous` followed by `turns` (oldest first)."""
        ...


class ScopeExecutor(Protocol):
    """Serializes writes per (username, graphname): the actor registry implements it."""

    async def run(self, scope: Scope, job: Callable[[], Awaitable[T]]) -> T:
        """Run `job` in the scope's order; raises Overloaded when the mailbox is full."""
        ...

    async def run_batched(
        self,
        scope: Scope,
        key: str,
        item: Item,
        batch: Callable[[list[Item]], Awaitable[Sequence[T | Exception]]],
    ) -> T:
        """Like `run` for one `item`, except that items of the same `key` queued back to back
        in the scope's order (nothing else between them) run as one call of `batch`, which
        answers each item in order: its result, or the exception its caller gets. An item
        whose caller gave up before the batch started is left out; if `batch` raises, every
        caller in it gets the error."""
        ...


class ConversationStore(Protocol):
    """Conversations, messages and summaries. Every method is confined to one scope."""

    async def append_messages(
        self,
        scope: Scope,
        conversation_id: str,
        messages: Sequence[NewMessage],
        conversation_name: str,
        timeout_s: float | None,
        *,
        create: bool = True,
    ) -> AppendOutcome:
        """One transaction: create the conversation if needed (NotFound when `create` is false
        and it does not exist), store the messages. A message whose id is already stored in the
        scope with the same role and content in this conversation is returned, not stored
        again; with other content or in another conversation AlreadyExists is raised. A
        `parent_id` must name a message of this conversation (or of this batch), else NotFound.
        Either way nothing is written."""
        ...

    async def context_candidates(
        self,
        scope: Scope,
        conversation_id: str,
        before_seq: int | None,
        cost_budget: int,
        timeout_s: float | None,
    ) -> ContextCandidates:
        """The current summary and, newest first, the unsummarized messages before
        `before_seq` (all when None) whose running `context_tokens` fit `cost_budget` (at
        least the newest one). Summary and messages come from one snapshot, and the summary is
        the newest one covering only messages before `before_seq`. Since a scope's messages
        are stored one at a time in seq order (however many servers store them), the
        messages before a stored message's seq are exactly those stored before it."""
        ...

    async def unsummarized(
        self, scope: Scope, conversation_id: str, room_tokens: int, timeout_s: float | None
    ) -> tuple[Summary | None, list[StoredMessage]]:
        """The current summary and, oldest first, every message after its watermark — but no
        messages when their `context_tokens` add up to at most `room_tokens` minus the
        summary's `context_tokens` (nothing to fold). One snapshot."""
        ...

    async def user_message_before(
        self,
        scope: Scope,
        conversation_id: str,
        reply_seq: int,
        parent_id: str,
        timeout_s: float | None,
    ) -> StoredMessage | None:
        """The user message a reply answers: `parent_id` if set, else the newest user
        message stored before the reply."""
        ...

    async def save_summary(
        self,
        scope: Scope,
        conversation_id: str,
        summary: Summary,
        summarizer: str,
        timeout_s: float | None,
    ) -> bool:
        """Append a summary version if it moves the watermark forward; False otherwise."""
        ...

    async def list_conversations(
        self, scope: Scope, page_size: int, cursor: str, timeout_s: float | None
    ) -> Page[ConversationInfo]: ...

    async def get_conversation(
        self,
        scope: Scope,
        conversation_id: str,
        page_size: int,
        cursor: str,
        timeout_s: float | None,
        page_bytes: int | None = None,
    ) -> tuple[ConversationInfo, Page[StoredMessage]]:
        """A page of at most `page_size` messages, and fewer when their text would pass
        `page_bytes` (always at least one)."""
        ...

    async def list_feedback(
        self,
        graphname: str,
        rated_only: bool,
        page_size: int,
        cursor: str,
        timeout_s: float | None,
        page_bytes: int | None = None,
    ) -> Page[FeedbackEntry]:
        """The one read across scopes: every user's messages on one graph (the admin export)."""
        ...

    async def set_feedback(
        self,
        scope: Scope,
        message_id: str,
        feedback: Feedback,
        comment: str,
        timeout_s: float | None,
    ) -> StoredMessage: ...

    async def rename_conversation(
        self, scope: Scope, conversation_id: str, name: str, timeout_s: float | None
    ) -> ConversationInfo: ...

    async def delete_conversation(
        self, scope: Scope, conversation_id: str, timeout_s: float | None
    ) -> int:
        """Deletes the conversation, its messages and summaries; returns the message count."""
        ...


class Embedder(Protocol):
    """Text → unit-length vectors. The shared embedding pool implements it for all scopes."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class Scrubbed:
    text: str  # the input without the sentences that held a secret
    secrets_found: int


class SecretFilter(Protocol):
    """Removes secrets (API keys, tokens, passwords, private keys, JWTs, cloud credentials, card
    numbers) before anything is extracted, stored, embedded or logged."""

    def scrub(self, text: str) -> Scrubbed: ...

    def redact(self, text: str) -> Scrubbed:
        """The text with each secret replaced by a typed placeholder (`[redacted: api key]`),
        the rest unchanged: what a stored message keeps."""
        ...


@dataclass(frozen=True, slots=True)
class ExtractionInput:
    user_text: str  # already scrubbed
    assistant_text: str  # already scrubbed
    # Facts recall put into this turn's context: never extract them again.
    recalled: Sequence[str] = ()


class Extractor(Protocol):
    """Finds durable user facts (preferences, decisions, goals, identity) in one turn."""

    @property
    def name(self) -> str: ...

    async def extract(self, turn: ExtractionInput) -> list[Candidate]: ...


class EventDates(Protocol):
    """Resolves the time expression of a fact's text ("yesterday", "last week", "in 2022")
    against the time it was said. Synchronous and CPU-bound: callers run it off the loop,
    and only for texts where `needs_resolving` (cheap) is true."""

    def needs_resolving(self, text: str) -> bool: ...

    def resolve(self, text: str, said_at: datetime) -> EventTime | None: ...


class Reconciler(Protocol):
    """Decides ADD / UPDATE / DELETE / NONE for each candidate against the scope's live facts."""

    async def reconcile(
        self,
        candidates: Sequence[Candidate],
        live: Sequence[LiveFact],
        *,
        live_vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> list[ReconciledCandidate]:
        """`live_vectors`: vectors the index already holds, by version id, so that live facts
        need not be embedded again (any missing are embedded)."""
        ...


@dataclass(frozen=True, slots=True)
class AsOf:
    """A bitemporal point; None means now. `AsOf()` selects exactly the live versions."""

    valid_time: datetime | None = None
    transaction_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """What the index keeps per fact version: the vector and what pre-filtering needs."""

    version_id: str
    scope_hash: str
    vector: Sequence[float]
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None


@dataclass(frozen=True, slots=True)
class VectorHit:
    version_id: str
    cosine: float  # in [-1, 1]


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """A semantic link between two versions of one scope, with its transaction interval, as
    an index that mirrors links as edges (TigerGraph) keeps it."""

    source_version_id: str
    target_version_id: str
    score: float  # cosine of the two vectors
    recorded_at: datetime
    superseded_at: datetime | None


class VectorIndex(Protocol):
    """Per-version vectors partitioned by scope_hash. Upserts and deletes are idempotent by
    version id. Search filters by scope and by the as-of point *before* ranking."""

    @property
    def name(self) -> str: ...

    async def upsert(
        self, records: Sequence[VectorRecord], links: Sequence[LinkRecord] = ()
    ) -> None:
        """Upserts the records and, in the same request where the index keeps links (as
        edges), the links; an index without edges ignores `links` (PostgreSQL has them)."""
        ...

    async def neighbours(
        self, scope_hash: str, vectors: Sequence[Sequence[float]], k: int
    ) -> list[list[VectorHit]]:
        """For each vector, its at most `k` most similar versions of the scope that are live
        (current in both times) in the index, best first."""
        ...

    async def delete(self, version_ids: Sequence[str]) -> None: ...

    async def purge_scope(self, scope_hash: str) -> None: ...

    async def search(
        self, scope_hash: str, vector: Sequence[float], k: int, as_of: AsOf
    ) -> list[VectorHit]: ...

    async def count(self, scope_hash: str) -> int: ...

    async def vectors(self, version_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of these versions (absent ones are left out)."""
        ...


@dataclass(frozen=True, slots=True)
class LinkedVersion:
    """A version reached by following one link from `from_version_id`, or (`neighbour`) said
    just before or after it in the same conversation (score 1)."""

    from_version_id: str
    version: FactVersion
    score: float
    neighbour: bool = False


@dataclass(frozen=True, slots=True)
class FactLink:
    """One end's view of a live link: the version it points at."""

    version_id: str  # the version whose link this is
    linked_fact_id: str
    linked_version_id: str
    score: float
    recorded_at: datetime


# Re-checks reconciliation decisions against the live facts as they are when they are applied
# (see FactStore.apply); it runs while the scope's other writers wait, so it must be quick.
Revise = Callable[[Sequence[LiveFact]], Sequence[ReconciledCandidate]]


@dataclass(frozen=True, slots=True)
class Applying:
    """One change for FactStore.apply_batch: decisions, their provenance and their re-check."""

    decisions: Sequence[ReconciledCandidate]
    provenance: Provenance
    revise: Revise | None = None


class FactStore(Protocol):
    """Facts of one scope at a time: bitemporal versions, history, and (inside `apply` and
    `forget_scope`) the outbox rows that mirror each change into the vector index.

    Every write holds the scope's write lock for its transaction, so writes of one scope are
    serialized even when several servers share the store."""

    async def live_facts(self, scope: Scope) -> list[LiveFact]: ...

    async def versions(
        self, scope: Scope, version_ids: Sequence[str], as_of: AsOf
    ) -> list[FactVersion]: ...

    async def standing(self, scope: Scope, limit: int) -> list[FactVersion]: ...

    async def lexical(
        self, scope: Scope, query: str, k: int, as_of: AsOf
    ) -> list[tuple[str, float]]: ...

    async def common_lexemes(
        self, scope: Scope, share: float, at_least: int, as_of: AsOf
    ) -> set[str]:
        """The stemmed words that more than `share` of the scope's versions believed at
        `as_of`, and at least `at_least` of them, contain."""
        ...

    async def lexemes_of(self, words: Sequence[str]) -> dict[str, list[str]]:
        """Each word's lexemes as `lexical` stems them."""
        ...

    async def list_facts(
        self, scope: Scope, as_of: AsOf, limit: int, offset: int
    ) -> list[FactVersion]: ...

    async def fact_versions(self, scope: Scope, fact_id: str) -> list[FactVersion]: ...

    async def history(self, scope: Scope, fact_id: str) -> list[HistoryEvent]: ...

    async def apply(
        self,
        scope: Scope,
        decisions: Sequence[ReconciledCandidate],
        provenance: Provenance,
        *,
        max_live: int,
        ended: bool = True,
        revise: Revise | None = None,
    ) -> list[AppliedChange]:
        """Applies the decisions in one transaction under the scope's write lock. With
        `revise`, the decisions applied are what it returns for the live facts read under the
        lock (the decisions were made against an earlier read, before another writer of the
        scope may have committed); if it raises, nothing is written and the error propagates."""
        ...

    async def apply_batch(
        self, scope: Scope, changes: Sequence[Applying], *, max_live: int, ended: bool = True
    ) -> list[list[AppliedChange]]:
        """`apply` for each change in turn, all in one transaction under one hold of the
        scope's write lock: each change's `revise` sees the live facts as the changes before
        it left them, and the answer is each change's applied list. If any change fails,
        nothing is written."""
        ...

    async def forget_scope(self, scope: Scope, *, include_messages: bool) -> dict[str, int]: ...

    async def linked(
        self, scope: Scope, version_ids: Sequence[str], as_of: AsOf, *, neighbours: bool = False
    ) -> list[LinkedVersion]:
        """One query: the versions linked to any of `version_ids` by a link believed at
        `as_of`'s transaction time and, with `neighbours`, the versions of each one's
        conversation said just before and just after it; each believed itself at `as_of`
        (filtered before anyone ranks them)."""
        ...

    async def live_links(self, scope: Scope, version_ids: Sequence[str]) -> list[FactLink]:
        """The live links of these versions (both ends live), best first."""
        ...

    async def stale_scopes(self, cutoff: datetime) -> list[Scope]: ...

    async def expire(self, scope: Scope, cutoff: datetime) -> int: ...

    async def purge_expired(self, cutoff: datetime) -> int: ...


class Telemetry(Protocol):
    """What the domain reports for monitoring (counted by the metrics adapter)."""

    def fact_decision(self, decision: str) -> None:
        """One applied reconciliation decision: ADD, UPDATE, DELETE or NONE."""
        ...

    def secrets_dropped(self, sentences: int) -> None:
        """Sentences the secret filter removed before extraction."""
        ...

    def learned(self, seconds: float) -> None:
        """One turn's background learning finished (facts applied, or nothing to learn)."""
        ...

    def live_vectors_missing(self, facts: int) -> None:
        """Live facts whose vector the index did not return, so they were embedded again."""
        ...


class NoTelemetry:
    """The default when nothing is monitored."""

    def fact_decision(self, decision: str) -> None:
        pass

    def secrets_dropped(self, sentences: int) -> None:
        pass

    def learned(self, seconds: float) -> None:
        pass

    def live_vectors_missing(self, facts: int) -> None:
        pass

"""Value types of conversation memory."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from memory_server.memory.facts.model import EventTime

T = TypeVar("T")


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class Feedback(enum.IntEnum):
    """Same numbering as GraphRAG's chat-history service."""

    NONE = 0
    UP = 1
    DOWN = 2


@dataclass(frozen=True, slots=True)
class NewMessage:
    role: Role
    content: str
    tokens: int  # of the content
    context_tokens: int  # of the message's unit in the context block (memory.conversation.stm)
    message_id: str  # empty: the domain generates one
    model: str = ""
    parent_id: str = ""
    response_time_seconds: float = 0.0
    feedback: Feedback = Feedback.NONE
    comment: str = ""
    created_at: datetime | None = None  # None = the database's now()


@dataclass(frozen=True, slots=True)
class StoredMessage:
    seq: int  # position in the whole store; orders a conversation
    message_id: str
    conversation_id: str
    role: Role
    content: str
    tokens: int  # of the content
    context_tokens: int  # of the message's unit in the context block (memory.conversation.stm)
    created_at: datetime
    model: str = ""
    parent_id: str = ""
    response_time_seconds: float = 0.0
    feedback: Feedback = Feedback.NONE
    comment: str = ""


@dataclass(frozen=True, slots=True)
class FeedbackEntry:
    """A message as the admin feedback export lists it: whose it is, and when it was rated."""

    username: str
    message: StoredMessage
    feedback_at: datetime | None  # None: never rated or commented


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    conversation_id: str
    name: str
    created_at: datetime
    updated_at: datetime
    message_count: int


@dataclass(frozen=True, slots=True)
class Summary:
    content: str
    tokens: int  # of the content
    context_tokens: int  # of the summary's unit in the context block (memory.conversation.stm)
    through_seq: int  # watermark: covers every message of the conversation with seq <= this
    through_message_id: str


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    conversation_created: bool
    messages: list[StoredMessage]  # in request order, newly stored or already present
    inserted: int


@dataclass(frozen=True, slots=True)
class ContextCandidates:
    """What the store hands the context builder: the summary and the newest unsummarized
    messages (newest first) whose estimated cost fits the budget."""

    conversation_exists: bool
    summary: Summary | None
    newest_first: list[StoredMessage]
    unsummarized_count: int
    # Whether the scope (user + graph) has any live long-term fact: recall runs only then.
    has_facts: bool = False
    # Whether it has messages out of this turn's window (another conversation, or turns
    # folded into the summary): episode recall runs only then.
    has_episodes: bool = False


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str = ""


@dataclass(frozen=True, slots=True)
class PageRequest:
    """Which page to read: at most `size` items after `cursor` (the previous page's
    `next_cursor`; "" for the first), and with `max_bytes`, fewer when their text would pass
    it (always at least one)."""

    size: int
    cursor: str = ""
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class RecalledFact:
    fact_id: str
    text: str
    score: float
    standing: bool = False  # a standing instruction, recalled whatever the question
    valid_from: datetime | None = None  # when it was said
    event: EventTime | None = None  # the date its text speaks of
    # Where it was learned (provenance): a context does not show this message as an episode.
    conversation_id: str = ""
    message_id: str = ""


@dataclass(frozen=True, slots=True)
class RecalledEpisode:
    """A message recalled as an episode (memory.recall.episodes): what was said, when, where."""

    message: StoredMessage
    score: float  # hybrid, in [0, 1]
    vector_score: float = 0.0
    lexical_score: float = 0.0


@dataclass(frozen=True, slots=True)
class LongTermSection:
    facts: list[RecalledFact] = field(default_factory=list)
    degraded_reason: str = ""
    # Messages of earlier conversations (or of this one, out of the window) the question
    # brings up; a context shows those that fit (memory.conversation.stm).
    episodes: list[RecalledEpisode] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MemoryContext:
    summary: Summary | None
    recent: list[StoredMessage]  # oldest first
    recent_tokens: int
    long_term: LongTermSection
    long_term_tokens: int  # of the long-term section in `rendered`
    rendered: str
    total_tokens: int
    budget_tokens: int
    omitted_messages: int
    episode_tokens: int = 0  # of the "From earlier conversations" section in `rendered`


@dataclass(frozen=True, slots=True)
class StartedTurn:
    message: StoredMessage
    context: MemoryContext
    conversation_created: bool


@dataclass(frozen=True, slots=True)
class CompletedTurn:
    message: StoredMessage
    compacted_inline: bool


@dataclass(frozen=True, slots=True)
class ReplyFields:
    model: str = ""
    parent_id: str = ""
    response_time_seconds: float = 0.0

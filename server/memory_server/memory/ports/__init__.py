"""The domain's view of the outside world: small Protocols that adapters implement, one module
per port (conversation, episodes, learning, questions, index, facts, secrets, telemetry).
Everything is re-exported here, so `from memory_server.memory.ports import FactStore` names any
of them."""

from memory_server.memory.ports.conversation import (
    ConversationStore,
    ScopeExecutor,
    Summarizer,
    SummaryTurn,
    TokenCounter,
)
from memory_server.memory.ports.episodes import Episodes, EpisodeStore
from memory_server.memory.ports.facts import Applying, FactLink, FactStore, LinkedVersion, Revise
from memory_server.memory.ports.index import (
    AsOf,
    Embedder,
    IndexOutbox,
    LinkRecord,
    NoOutbox,
    VectorHit,
    VectorIndex,
    VectorRecord,
)
from memory_server.memory.ports.learning import EventDates, ExtractionInput, Extractor, Reconciler
from memory_server.memory.ports.questions import QuestionSplitter
from memory_server.memory.ports.secrets import Scrubbed, SecretFilter
from memory_server.memory.ports.telemetry import NoTelemetry, Telemetry

__all__ = [
    "Applying",
    "AsOf",
    "ConversationStore",
    "Embedder",
    "EpisodeStore",
    "Episodes",
    "EventDates",
    "ExtractionInput",
    "Extractor",
    "FactLink",
    "FactStore",
    "IndexOutbox",
    "LinkRecord",
    "LinkedVersion",
    "NoOutbox",
    "NoTelemetry",
    "QuestionSplitter",
    "Reconciler",
    "Revise",
    "ScopeExecutor",
    "Scrubbed",
    "SecretFilter",
    "Summarizer",
    "SummaryTurn",
    "Telemetry",
    "TokenCounter",
    "VectorHit",
    "VectorIndex",
    "VectorRecord",
]

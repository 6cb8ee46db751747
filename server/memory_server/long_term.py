"""Long-term memory built from the settings: recall, learning and the manual operations over
one fact store, index and embedder. What it learns with: the rule extractor and the similarity
reconciler, or (with `llm_base_url`) mem0's extraction and one LLM reconciliation call that
fall back to them."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass

from memory_server.embedding.backend import AsyncEmbeddingBackend, EmbeddingBackend
from memory_server.embedding.minilm import MiniLMBackend
from memory_server.embedding.openai import OpenAICompatibleEmbeddings
from memory_server.embedding.pool import EmbeddingPool
from memory_server.extraction.event_dates import DateparserEvents
from memory_server.memory.facts.admin import FactAdmin
from memory_server.memory.facts.changes import FactChanges
from memory_server.memory.facts.meaning import RESTATED_AT
from memory_server.memory.facts.probe import FactProbe
from memory_server.memory.facts.reconcile import SimilarityReconciler
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.learning.learn import Learning
from memory_server.memory.learning.reading import TurnReader
from memory_server.memory.ports import (
    EpisodeStore,
    Extractor,
    FactStore,
    IndexOutbox,
    QuestionSplitter,
    Reconciler,
    ScopeExecutor,
    SecretFilter,
    Telemetry,
    VectorIndex,
)
from memory_server.memory.recall.common_words import CommonWords
from memory_server.memory.recall.episodes import EpisodeRecall, EpisodeSettings
from memory_server.memory.recall.expand import ExpandSettings
from memory_server.memory.recall.search import Recall, RecallSettings
from memory_server.memory.recall.second_hop import HopSettings
from memory_server.memory.recall.seen import SeenRecorder
from memory_server.memory.recall.shared_vectors import SharedEmbeddings
from memory_server.outbox.fresh import FreshIndex
from memory_server.settings import Settings

__all__ = ["LongTerm", "build_long_term", "embedding_backend", "learning_parts", "recall_settings"]

log = logging.getLogger(__name__)


def learning_parts(
    settings: Settings, embedder: EmbeddingPool, stack: AsyncExitStack
) -> tuple[Extractor, Extractor | None, Reconciler]:
    """(extractor, the extractor it falls back to, reconciler); what needs closing goes on
    `stack`."""
    extractor: Extractor = RuleExtractor(
        self_statements=settings.ltm_self_statements, precise=settings.ltm_precise_facts
    )
    # With precise facts, a state said again in other words is not stored twice, and small
    # talk the rules let through is judged by the probe. Both are measured on the offline
    # model's vectors (its cosines, its probe): with another model only the word rules apply.
    probe = FactProbe.for_model(embedder.model_name) if settings.ltm_precise_facts else None
    if settings.ltm_precise_facts and probe is None:
        log.info(
            "learning: the fact probe and the restatement cut-off are for the offline model; "
            "with %s only the word rules judge learned facts",
            embedder.model_name,
        )
    reconciler: Reconciler = SimilarityReconciler(
        embedder, restated_at=RESTATED_AT if probe else None, probe=probe
    )
    if not settings.llm_base_url:
        return extractor, None, reconciler
    # mem0 extracts and one LLM call reconciles; both fall back to the rules when the endpoint
    # fails. mem0 itself is imported on the first extraction.
    from memory_server.extraction.llm_reconciler import LLMReconciler
    from memory_server.extraction.mem0_extractor import Mem0Extractor

    mem0 = Mem0Extractor(
        settings.llm_base_url,
        settings.llm_model,
        settings.llm_api_key or None,
        embedder,
        settings.llm_timeout_seconds,
    )
    stack.push_async_callback(mem0.close)
    llm_reconciler = LLMReconciler(
        settings.llm_base_url,
        settings.llm_model,
        settings.llm_api_key or None,
        settings.llm_timeout_seconds,
        fallback=reconciler,
    )
    stack.push_async_callback(llm_reconciler.close)
    return mem0, extractor, llm_reconciler


@dataclass(frozen=True, slots=True)
class LongTerm:
    """Long-term memory's use cases: recall, learning after a reply, the manual operations,
    and episode search (None when `episodes` is off)."""

    recall: Recall
    learning: Learning
    facts: FactAdmin
    episodes: EpisodeRecall | None = None


def build_long_term(
    settings: Settings,
    *,
    store: FactStore,
    episode_store: EpisodeStore,
    index: VectorIndex,
    embedder: EmbeddingPool,
    executor: ScopeExecutor,
    secrets: SecretFilter,
    outbox: IndexOutbox,
    telemetry: Telemetry,
    seen: SeenRecorder,
    stack: AsyncExitStack,
) -> LongTerm:
    """Long-term memory built from the settings; what needs closing goes on `stack`."""
    events = DateparserEvents()
    common_words = CommonWords(store, settings.ltm_common_word_share)
    changes = FactChanges(
        store=store,
        common_words=common_words,
        max_live=settings.max_facts_per_scope,
        outbox=outbox,
        telemetry=telemetry,
    )
    # A turn's fact recall and episode recall embed the same question once.
    question_embedder = SharedEmbeddings(embedder)
    recall = Recall(
        store=store,
        index=index,
        embedder=question_embedder,
        common_words=common_words,
        settings=recall_settings(settings),
        events=events,
        seen=seen,
        splitter=question_splitter(settings, secrets, stack),
    )
    extractor, fallback, reconciler = learning_parts(settings, embedder, stack)
    reader = TurnReader(
        secrets=secrets,
        extractor=extractor,
        fallback=fallback,
        events=events,
        telemetry=telemetry,
    )
    learning = Learning(
        store=store,
        reader=reader,
        reconciler=reconciler,
        changes=changes,
        index=index,
        executor=executor,
        telemetry=telemetry,
    )
    facts = FactAdmin(store=store, changes=changes, executor=executor, events=events)
    episodes = None
    if settings.episodes:
        episodes = EpisodeRecall(
            store=episode_store,
            index=index.index if isinstance(index, FreshIndex) else index,
            fresh_index=index,
            embedder=question_embedder,
            common_words=common_words,
            settings=EpisodeSettings(
                settings.episode_top_k,
                settings.episode_score_threshold,
                settings.episode_context_tokens,
                neighbour_decay=settings.episode_neighbour_decay,
                seeds=settings.ltm_link_seeds,
                time_intent_weight=settings.ltm_time_intent_weight,
            ),
            events=events,
        )
    return LongTerm(recall, learning, facts, episodes)


def question_splitter(
    settings: Settings, secrets: SecretFilter, stack: AsyncExitStack
) -> QuestionSplitter | None:
    """The model that writes follow-up questions (ltm_split_questions), or None."""
    if not (settings.ltm_split_questions and settings.llm_base_url):
        return None
    from memory_server.extraction.llm_questions import LLMQuestionSplitter

    splitter = LLMQuestionSplitter(
        settings.llm_base_url,
        settings.llm_model,
        settings.llm_api_key or None,
        settings.llm_timeout_seconds,
        secrets,
    )
    stack.push_async_callback(splitter.close)
    return splitter


def recall_settings(settings: Settings) -> RecallSettings:
    return RecallSettings(
        top_k=settings.ltm_top_k,
        score_threshold=settings.ltm_score_threshold,
        expansion=ExpandSettings(
            settings.ltm_link_decay,
            settings.ltm_link_seeds,
            neighbour_decay=settings.ltm_neighbour_decay,
        ),
        time_intent_weight=settings.ltm_time_intent_weight,
        off_subject_weight=settings.ltm_off_subject_weight,
        second_hop=HopSettings(settings.ltm_second_hop_weight, settings.ltm_second_hop_bridges),
    )


def embedding_backend(settings: Settings) -> EmbeddingBackend | AsyncEmbeddingBackend:
    """The configured model; nothing is loaded until the first text is embedded."""
    if settings.embedding_base_url:
        return OpenAICompatibleEmbeddings(
            base_url=settings.embedding_base_url,
            model=settings.embedding_model,
            api_key=settings.embedding_api_key or None,
            dimension=settings.embedding_dimension,
            timeout_s=settings.request_timeout_seconds,
        )
    return MiniLMBackend()

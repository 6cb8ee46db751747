"""What long-term memory learns with, chosen from the settings: the rule extractor and the
similarity reconciler, or (with `llm_base_url`) mem0's extraction and one LLM reconciliation
call that fall back to them; and LongTermMemory's settings."""

from __future__ import annotations

from contextlib import AsyncExitStack

from memory_server.embedding.pool import EmbeddingPool
from memory_server.memory.facts.reconcile import SimilarityReconciler
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.ltm import LtmSettings
from memory_server.memory.ports import Extractor, Reconciler
from memory_server.memory.recall.expand import ExpandSettings
from memory_server.settings import Settings

__all__ = ["learning_parts", "ltm_settings"]


def learning_parts(
    settings: Settings, embedder: EmbeddingPool, stack: AsyncExitStack
) -> tuple[Extractor, Extractor | None, Reconciler]:
    """(extractor, the extractor it falls back to, reconciler); what needs closing goes on
    `stack`."""
    extractor: Extractor = RuleExtractor(self_statements=settings.ltm_self_statements)
    reconciler: Reconciler = SimilarityReconciler(embedder)
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


def ltm_settings(settings: Settings) -> LtmSettings:
    return LtmSettings(
        top_k=settings.ltm_top_k,
        score_threshold=settings.ltm_score_threshold,
        max_facts_per_scope=settings.max_facts_per_scope,
        expansion=ExpandSettings(
            settings.ltm_link_decay,
            settings.ltm_link_seeds,
            neighbour_decay=settings.ltm_neighbour_decay,
        ),
        time_intent_weight=settings.ltm_time_intent_weight,
        common_word_share=settings.ltm_common_word_share,
        off_subject_weight=settings.ltm_off_subject_weight,
    )

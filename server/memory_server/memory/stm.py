"""Short-term memory: what fits in the planner's token budget, and when to fold.

The context block is: a header saying this is memory (not graph evidence), the rolling
summary, long-term facts, then the newest exact turns, oldest first. Its tiktoken count never
exceeds the budget. Turns that do not fit and are not yet summarized are left out (and counted);
compaction folds the oldest of them into the summary so the gap closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_server.memory.model import (
    LongTermSection,
    MemoryContext,
    StoredMessage,
    Summary,
)
from memory_server.memory.ports import TokenCounter

HEADER = (
    "## Memory context (not graph evidence)\n"
    "What this service remembers of the user and this conversation. Use it to understand the "
    "question; never cite it as evidence from the knowledge graph."
)
SUMMARY_HEADING = "### Summary of earlier conversation"
FACTS_HEADING = "### Long-term memory about the user"
RECENT_HEADING = "### Recent messages"

# Tokens a message line adds beyond its content ("user: " + newline), with margin.
LINE_OVERHEAD_TOKENS = 4
# Compaction folds until the unsummarized turns use at most this share of what is left of the
# budget after header and summary: the hysteresis keeps it from running on every turn.
FOLD_TARGET_RATIO = 0.6


def message_line(message: StoredMessage) -> str:
    return f"{message.role.value}: {message.content}"


def message_cost(message: StoredMessage) -> int:
    return message.tokens + LINE_OVERHEAD_TOKENS


@dataclass(frozen=True, slots=True)
class StmBudget:
    budget_tokens: int
    summary_max_tokens: int
    header_tokens: int

    @classmethod
    def create(
        cls, counter: TokenCounter, budget_tokens: int, summary_max_tokens: int
    ) -> StmBudget:
        return cls(budget_tokens, summary_max_tokens, counter.count(HEADER) + 4)

    def for_messages(self, summary: Summary | None, facts_tokens: int = 0) -> int:
        """Estimated tokens left for exact turns once header, summary and facts are placed."""
        used = self.header_tokens + facts_tokens + 8
        if summary is not None:
            used += summary.tokens + 8
        return max(0, self.budget_tokens - used)


def render(
    summary: Summary | None, long_term: LongTermSection, recent: Sequence[StoredMessage]
) -> str:
    parts = [HEADER]
    if summary is not None and summary.content:
        parts.append(f"{SUMMARY_HEADING}\n{summary.content}")
    if long_term.facts:
        parts.append(FACTS_HEADING + "\n" + "\n".join(f"- {f.text}" for f in long_term.facts))
    if recent:
        parts.append(RECENT_HEADING + "\n" + "\n".join(message_line(m) for m in recent))
    return "\n\n".join(parts)


def build_context(
    *,
    counter: TokenCounter,
    budget: StmBudget,
    summary: Summary | None,
    newest_first: Sequence[StoredMessage],
    unsummarized_count: int,
    long_term: LongTermSection,
) -> MemoryContext:
    """Newest turns that fit, oldest first; the rendered block is counted exactly and trimmed
    from the oldest turn until it fits."""
    facts_tokens = sum(counter.count(f.text) + 2 for f in long_term.facts)
    room = budget.for_messages(summary, facts_tokens)
    chosen: list[StoredMessage] = []
    used = 0
    for message in newest_first:
        cost = message_cost(message)
        if used + cost > room:
            break
        chosen.append(message)
        used += cost
    chosen.reverse()

    rendered = render(summary, long_term, chosen)
    total = counter.count(rendered)
    while total > budget.budget_tokens and chosen:
        used -= message_cost(chosen.pop(0))
        rendered = render(summary, long_term, chosen)
        total = counter.count(rendered)
    if total > budget.budget_tokens and summary is not None:
        # Only reachable with a summary written under a larger budget: shorten it.
        room_for_summary = max(0, summary.tokens - (total - budget.budget_tokens) - 8)
        content = counter.truncate(summary.content, room_for_summary)
        summary = Summary(
            content, counter.count(content), summary.through_seq, summary.through_message_id
        )
        rendered = render(summary, long_term, chosen)
        total = counter.count(rendered)
    return MemoryContext(
        summary=summary,
        recent=chosen,
        recent_tokens=sum(m.tokens for m in chosen),
        long_term=long_term,
        rendered=rendered,
        total_tokens=total,
        budget_tokens=budget.budget_tokens,
        omitted_messages=max(0, unsummarized_count - len(chosen)),
    )


def plan_fold(
    *, budget: StmBudget, summary: Summary | None, unsummarized: Sequence[StoredMessage]
) -> list[StoredMessage]:
    """The oldest unsummarized messages to fold now (empty when everything fits).

    The room is computed as if the summary were already at its maximum size, so that after the
    fold the newest turns still fit beside the grown summary."""
    total = sum(message_cost(m) for m in unsummarized)
    if total <= budget.for_messages(summary):
        return []
    grown = Summary("", budget.summary_max_tokens, 0, "")
    target = int(budget.for_messages(grown) * FOLD_TARGET_RATIO)
    fold: list[StoredMessage] = []
    for message in unsummarized:
        if total <= target:
            break
        fold.append(message)
        total -= message_cost(message)
    return fold

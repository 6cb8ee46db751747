"""Short-term memory: what fits in the planner's token budget, and when to fold.

The context block is a header saying this is memory (not graph evidence), the rolling summary,
long-term facts, dated excerpts of earlier conversations (episodes), then the newest exact
turns, oldest first. Its tiktoken count never exceeds the
budget. Turns that do not fit and are not yet summarized are left out (and counted); compaction
folds the oldest of them into the summary so the gap closes.

The block is built from *units*, each ending in a newline and each followed by a unit that
starts with a non-space character. cl100k's pre-tokenizer always starts a new piece after such a
newline, so the block's token count is exactly the sum of its units' counts. Each message's unit
count is stored with the message, so a context costs no tokenization at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from memory_server.memory.conversation.model import (
    LongTermSection,
    MemoryContext,
    RecalledEpisode,
    RecalledFact,
    Role,
    StoredMessage,
    Summary,
)
from memory_server.memory.ports import TokenCounter

HEADER_UNIT = (
    "## Memory context (not graph evidence)\n"
    "What this service remembers of the user and this conversation. Use it to understand the "
    "question; never cite it as evidence from the knowledge graph.\n\n"
)
SUMMARY_HEADING = "### Summary of earlier conversation\n"
FACTS_HEADING = "### Long-term memory about the user\n"
RECENT_HEADING_UNIT = "### Recent messages\n"
EPISODES_HEADING = "### From earlier conversations\n"
# The longest excerpt of one episode in a context, in tokens (the message itself is longer).
EXCERPT_TOKENS = 80

# Compaction folds until the unsummarized turns use at most this share of what is left of the
# budget after header and summary: the hysteresis keeps it from running on every turn.
FOLD_TARGET_RATIO = 0.6


def message_unit(role: Role, content: str) -> str:
    return f"{role.value}: {content}\n"


def summary_unit(content: str) -> str:
    return f"{SUMMARY_HEADING}{content}\n\n"


def fact_line(fact: RecalledFact) -> str:
    """One recalled fact with its dates (UTC), so that a "when" question can be answered from
    memory alone: when it was stated, and the date its text refers to ("yesterday" stated on
    2023-05-08 refers to 2023-05-07)."""
    dates = []
    if fact.valid_from is not None:
        said = fact.valid_from  # naive only for PostgreSQL's -infinity (0001-01-01)
        said = said.astimezone(UTC) if said.tzinfo else said.replace(tzinfo=UTC)
        dates.append(f"stated {said:%Y-%m-%d}")
    if fact.event is not None:
        dates.append(f"refers to {fact.event.label()}")
    return f"- {fact.text} ({'; '.join(dates)})\n" if dates else f"- {fact.text}\n"


def facts_unit(long_term: LongTermSection) -> str:
    if not long_term.facts:
        return ""
    return FACTS_HEADING + "".join(fact_line(f) for f in long_term.facts) + "\n"


def _utc_date(when: datetime) -> str:
    when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return f"{when:%Y-%m-%d}"


def episode_line(counter: TokenCounter, episode: RecalledEpisode) -> str:
    """One episode: its date (UTC), its conversation, who said it, and the start of what was
    said, on one line."""
    message = episode.message
    text = " ".join(message.content.split())
    excerpt = counter.truncate(text, EXCERPT_TOKENS)
    if len(excerpt) < len(text):
        excerpt = excerpt.rstrip() + " …"
    return (
        f"- {_utc_date(message.created_at)} (conversation {message.conversation_id}) "
        f"{message.role.value}: {excerpt}\n"
    )


@dataclass(frozen=True, slots=True)
class EpisodeRoom:
    """How much of a context episodes may take: at most `top_k` lines in `max_tokens`."""

    top_k: int = 0
    max_tokens: int = 0


def episodes_unit(
    counter: TokenCounter,
    long_term: LongTermSection,
    room: EpisodeRoom,
    left_out: Callable[[int], bool],
) -> tuple[str, list[RecalledEpisode]]:
    """The "From earlier conversations" unit and the episodes in it: the best that fit, but
    none `left_out` (by seq: already in the window, or not said before the turn) and none a
    shown fact was learned from."""
    if not long_term.episodes or room.top_k == 0:
        return "", []
    learned_from = {(f.conversation_id, f.message_id) for f in long_term.facts if f.message_id}
    used = counter.count(EPISODES_HEADING) + 1  # the blank line that ends the unit
    lines: list[str] = []
    chosen: list[RecalledEpisode] = []
    for episode in long_term.episodes:
        message = episode.message
        if left_out(message.seq) or (message.conversation_id, message.message_id) in learned_from:
            continue
        line = episode_line(counter, episode)
        cost = counter.count(line)
        if used + cost > room.max_tokens:
            continue
        lines.append(line)
        chosen.append(episode)
        used += cost
        if len(chosen) == room.top_k:
            break
    if not chosen:
        return "", []
    return EPISODES_HEADING + "".join(lines) + "\n", chosen


@dataclass(frozen=True, slots=True)
class StmBudget:
    budget_tokens: int
    summary_max_tokens: int
    header_tokens: int
    recent_heading_tokens: int
    summary_heading_tokens: int

    @classmethod
    def create(
        cls, counter: TokenCounter, budget_tokens: int, summary_max_tokens: int
    ) -> StmBudget:
        return cls(
            budget_tokens,
            summary_max_tokens,
            counter.count(HEADER_UNIT),
            counter.count(RECENT_HEADING_UNIT),
            counter.count(summary_unit("")),
        )

    def for_messages(self, summary_tokens: int, facts_tokens: int = 0) -> int:
        """Tokens left for message units once header, summary and facts are placed."""
        used = self.header_tokens + self.recent_heading_tokens + summary_tokens + facts_tokens
        return max(0, self.budget_tokens - used)

    def summary_bound(self) -> int:
        """Tokens the summary unit may take at most (heading and spacing included)."""
        return self.summary_max_tokens + self.summary_heading_tokens


def render(
    summary: Summary | None,
    long_term: LongTermSection,
    recent: Sequence[StoredMessage],
    episodes: str = "",
) -> str:
    parts = [HEADER_UNIT]
    if summary is not None and summary.content:
        parts.append(summary_unit(summary.content))
    parts.append(facts_unit(long_term))
    parts.append(episodes)
    if recent:
        parts.append(RECENT_HEADING_UNIT)
        parts.extend(message_unit(m.role, m.content) for m in recent)
    return "".join(parts)


def build_context(
    *,
    counter: TokenCounter,
    budget: StmBudget,
    summary: Summary | None,
    newest_first: Sequence[StoredMessage],
    unsummarized_count: int,
    long_term: LongTermSection,
    episode_room: EpisodeRoom = EpisodeRoom(),
    before_seq: int | None = None,
) -> MemoryContext:
    """Newest turns that fit, oldest first, counted exactly from their stored unit counts;
    before them, the episodes that fit `episode_room` and the room the facts leave, other
    than the candidate turns and anything said from `before_seq` on (the turn's own
    message)."""
    facts = facts_unit(long_term)
    facts_tokens = counter.count(facts) if facts else 0
    if summary is not None and not summary.content:
        summary = None
    summary_tokens = summary.context_tokens if summary is not None else 0
    if budget.header_tokens + summary_tokens + facts_tokens > budget.budget_tokens:
        # Only reachable with a summary written under a larger budget: leave it out.
        summary, summary_tokens = None, 0
    left = budget.for_messages(summary_tokens, facts_tokens)
    in_window = {m.seq for m in newest_first}
    episodes, shown = episodes_unit(
        counter,
        long_term,
        EpisodeRoom(episode_room.top_k, min(episode_room.max_tokens, left)),
        lambda seq: seq in in_window or (before_seq is not None and seq >= before_seq),
    )
    episode_tokens = counter.count(episodes) if episodes else 0
    if shown:
        long_term = replace(long_term, episodes=shown)
    elif long_term.episodes:
        long_term = replace(long_term, episodes=[])
    room = budget.for_messages(summary_tokens, facts_tokens + episode_tokens)
    chosen: list[StoredMessage] = []
    used = 0
    for message in newest_first:
        if used + message.context_tokens > room:
            break
        chosen.append(message)
        used += message.context_tokens
    chosen.reverse()
    total = budget.header_tokens + summary_tokens + facts_tokens + episode_tokens
    if chosen:
        total += budget.recent_heading_tokens + used
    return MemoryContext(
        summary=summary,
        recent=chosen,
        recent_tokens=sum(m.tokens for m in chosen),
        long_term=long_term,
        long_term_tokens=facts_tokens,
        rendered=render(summary, long_term, chosen, episodes),
        total_tokens=total,
        budget_tokens=budget.budget_tokens,
        omitted_messages=max(0, unsummarized_count - len(chosen)),
        episode_tokens=episode_tokens,
    )


def plan_fold(
    *, budget: StmBudget, summary: Summary | None, unsummarized: Sequence[StoredMessage]
) -> list[StoredMessage]:
    """The oldest unsummarized messages to fold now (empty when everything fits).

    The target room assumes the summary already at its maximum size, so that after the fold
    the newest turns still fit beside the grown summary."""
    total = sum(m.context_tokens for m in unsummarized)
    if total <= budget.for_messages(summary.context_tokens if summary else 0):
        return []
    target = int(budget.for_messages(budget.summary_bound()) * FOLD_TARGET_RATIO)
    fold: list[StoredMessage] = []
    for message in unsummarized:
        if total <= target:
            break
        fold.append(message)
        total -= message.context_tokens
    return fold

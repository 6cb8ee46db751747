"""The context block's token count is exact without re-tokenizing it (memory.conversation.stm
units)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from memory_server.memory.conversation.model import (
    LongTermSection,
    RecalledFact,
    Role,
    StoredMessage,
    Summary,
)
from memory_server.memory.conversation.stm import (
    StmBudget,
    build_context,
    message_unit,
    summary_unit,
)
from memory_server.tokens import TiktokenCounter

COUNTER = TiktokenCounter()
AWKWARD = [
    "Which accounts share a device with account 4471?",
    "ends with spaces   ",
    "ends with a newline\n",
    "\nstarts with a newline",
    "   starts with spaces",
    "blank lines\n\n\ninside",
    "tabs\tand\ttabs\t",
    "emoji 🎉🎉 and 中文内容测试。",
    "'s a contraction at the start",
    "windows line end\r\n",
    "...",
    "#not a heading",
    "123456789 numbers",
    "\u00a0non-breaking space",
    "x",
]


def _message(seq: int, role: Role, content: str) -> StoredMessage:
    return StoredMessage(
        seq=seq,
        message_id=f"m{seq}",
        conversation_id="c",
        role=role,
        content=content,
        tokens=COUNTER.count(content),
        context_tokens=COUNTER.count(message_unit(role, content)),
        created_at=datetime.now(UTC),
    )


def test_total_tokens_equals_a_recount_of_the_rendered_block():
    rng = random.Random(7)
    for trial in range(300):
        budget = StmBudget.create(COUNTER, rng.choice([256, 400, 1000, 6000]), 64)
        messages = [
            _message(i, rng.choice(list(Role)), rng.choice(AWKWARD) + rng.choice(AWKWARD))
            for i in range(rng.randint(0, 40))
        ]
        summary = None
        if rng.random() < 0.5:
            text = rng.choice(AWKWARD) + " summary"
            summary = Summary(text, COUNTER.count(text), COUNTER.count(summary_unit(text)), 1, "m1")
        facts = LongTermSection(
            [RecalledFact("f", rng.choice(AWKWARD), 0.9) for _ in range(rng.randint(0, 3))]
        )
        context = build_context(
            counter=COUNTER,
            budget=budget,
            summary=summary,
            newest_first=list(reversed(messages)),
            unsummarized_count=len(messages),
            long_term=facts,
        )
        assert context.total_tokens == COUNTER.count(context.rendered), trial
        assert context.total_tokens <= budget.budget_tokens
        assert context.omitted_messages == len(messages) - len(context.recent)
        if context.recent:
            assert context.recent[-1] is messages[-1]  # the newest turn is always first in

"""Follow-up questions made standalone for GraphRAG's retrieval, with GraphRAG's own LLM.

GraphRAG retrieves with the question as typed: "Which of them was flagged?" reaches its
vector and keyword search without the accounts "them" stands for. The memory block gives the
answer prompt the earlier turns, but retrieval has already run by then. `standalone_question`
asks GraphRAG's LLM to rewrite the question against the turn's history before the agent runs.

Cost: one completion call per turn that has history (none on a conversation's first turn, none
when memory is off or failed); its prompt is `STANDALONE_PROMPT` (104 tokens in cl100k_base)
plus the history `run_agent` gets (the summary and at most 3 exact turns, inside the service's
`stm_context_tokens`), and its answer one question. It is not among the default edits
(`memory_client.graphrag.integration.edits`): the integration guide shows the one line that
turns it on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from memory_client.graphrag.integration._turns import AgentTurn

__all__ = ["STANDALONE_PROMPT", "standalone_question"]

log = logging.getLogger(__name__)

STANDALONE_PROMPT = (
    "Rewrite the user's last question so that it can be understood without the conversation "
    "before it: replace words like 'it', 'them', 'that one' or 'the same' with what they refer "
    "to in the conversation. Keep every name, id, number and date exactly as written. Do not "
    "answer the question and do not add anything it does not ask. If it already stands alone, "
    "repeat it unchanged. Reply with the question only, on one line.\n\n"
    "Conversation:\n{history}\n\nLast question: {question}\nStandalone question:"
)

# A rewrite longer than this (in characters, beyond the question's own length) is an answer or
# an explanation, not a question: the question is kept as typed.
_SLACK_CHARS = 300


def _history_text(turn: AgentTurn) -> str:
    return "\n".join(
        f"User: {item['query']}\nAssistant: {item['response']}" for item in turn.history
    )


async def standalone_question(
    turn: AgentTurn, question: str, complete: Callable[[str], str]
) -> str:
    """`question` rewritten to stand alone, or unchanged when there is no history, the LLM
    fails, or its reply is not one question. `complete` is GraphRAG's LLM as a blocking
    prompt-to-text call, e.g. `lambda p: agent.llm.model.invoke(p).content`; it runs in a
    worker thread, off the event loop."""
    if turn.turn is None or not turn.history:
        return question
    prompt = STANDALONE_PROMPT.format(history=_history_text(turn), question=question)
    try:
        reply = await asyncio.to_thread(complete, prompt)
    except Exception as exc:  # any LLM failure: retrieval uses the question as typed
        log.warning(
            "memory: the standalone rewrite failed (%s); using the question as typed",
            type(exc).__name__,
        )
        return question
    lines = [line.strip() for line in str(reply).strip().splitlines() if line.strip()]
    if len(lines) != 1 or len(lines[0]) > len(question) + _SLACK_CHARS:
        return question
    return lines[0].removeprefix("Standalone question:").strip() or question

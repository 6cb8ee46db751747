"""The run report the test prints: branches, turns, timings, what GraphRAG asked of TigerGraph
and the LLM, and what was asserted, short enough to quote."""

from __future__ import annotations

from collections import Counter

from .harness import Run
from .ui import Chat


def _chat_line(name: str, chat: Chat) -> str:
    kinds: Counter[str] = Counter(p.kind for t in chat.turns for p in t.prompts)
    replies = ",".join(str(t.reply.get("response_type")) for t in chat.turns)
    seconds = "/".join(f"{t.seconds:.1f}" for t in chat.turns)
    prompts = " ".join(f"{k}x{n}" for k, n in sorted(kinds.items()))
    return (
        f"  {name:<10} {chat.pattern:<12} {len(chat.turns)} turn(s) {seconds} s; "
        f"reply types {replies}; prompts {prompts}"
    )


def render(run: Run, header: str) -> str:
    lines = [f"=== GraphRAG run report: {header} ({run.mode}) ==="]
    for key, value in run.notes.items():
        first = value.splitlines()[0] if value else ""
        lines.append(f"{key}: {first}")
    lines.append("timings:")
    lines += [f"  {k}: {v:.1f}" for k, v in run.timings.items()]
    lines.append("conversations (branch, RAG pattern, turns, seconds per turn):")
    for name, chat in run.chats.items():
        lines.append(_chat_line(name, chat))
    if run.reconnect is not None:
        lines.append(_chat_line("reconnect", run.reconnect))
    if run.bob is not None:
        lines.append(_chat_line("bob", run.bob))
    lines.append("UI history routes:")
    lines += [f"  {key}: {a.route} -> {a.status}" for key, a in run.http.items()]
    lines.append("GraphRAG's calls on TigerGraph (stand-in):")
    lines += [f"  {call} x{n}" for call, n in run.tg.world.calls_by("graphrag").items()]
    if run.tg.world.unserved:
        lines.append(f"  queries the stand-in does not serve: {sorted(set(run.tg.world.unserved))}")
    memory_calls = run.tg.world.calls_by("memory")
    lines.append(f"memory server's calls on the same stand-in: {sum(memory_calls.values())}")
    lines.append("asserted:")
    counted = Counter(run.asserted)
    lines += [f"  - {a}" + (f" (x{n})" if n > 1 else "") for a, n in counted.items()]
    return "\n".join(lines)

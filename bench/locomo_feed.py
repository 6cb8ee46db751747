"""LoCoMo conversations fed through the learning path (StartTurn / CompleteTurn), one scope per
speaker, with the sessions' own times; then the server's metrics say when learning is done.

Used by bench/locomo_learning.py; see bench/README.md for what is fed and why.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from locomo_data import Conversation, Turn
from reporting import Progress
from rpc import timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

GRAPHNAME = "LoCoMo"
_METRIC_LINE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$")
_METRICS_AT = re.compile(r"metrics on (http://[\d.]+:\d+/metrics)")


@dataclass(frozen=True, slots=True)
class Observation:
    """One of LoCoMo's generated per-session observations about a speaker, with its source."""

    speaker: str
    text: str
    dia_id: str


@dataclass(frozen=True, slots=True)
class Extras:
    """What locomo_data does not load: speakers, observations."""

    speakers: tuple[str, str]
    observations: list[Observation]


@dataclass(frozen=True, slots=True)
class Side:
    """One scope of a conversation: `user` speaks as the user, the other as the assistant."""

    sample_id: str
    user: str
    # Names the scope instead of the speaker (--anonymous-scopes): the server then cannot tell
    # the user's name from the username (memory.recall.episodes.without_own_name).
    alias: str = ""

    @property
    def username(self) -> str:
        return f"learn-{self.sample_id}-{self.alias or self.user}"


@dataclass
class Fed:
    """What feeding one side produced: message id -> dia_id, and per-RPC latencies."""

    side: Side
    message_turn: dict[str, str] = field(default_factory=dict)
    start_s: list[float] = field(default_factory=list)
    complete_s: list[float] = field(default_factory=list)
    imported: int = 0  # leading assistant turns stored through AppendMessages (nothing to learn)
    unanswered: int = 0  # user turns ending a session: StartTurn only, so never learned from
    extractors: dict[str, int] = field(default_factory=dict)  # live facts by extractor


def load_extras(path: Path, sample_ids: Sequence[str]) -> dict[str, Extras]:
    samples = {s["sample_id"]: s for s in json.loads(path.read_text(encoding="utf-8"))}
    out: dict[str, Extras] = {}
    for sid in sample_ids:
        sample = samples[sid]
        conversation = sample["conversation"]
        observations = [
            Observation(speaker, str(item[0]), str(item[1]))
            for session in (sample.get("observation") or {}).values()
            for speaker, items in session.items()
            for item in items
            if len(item) >= 2
        ]
        out[sid] = Extras((conversation["speaker_a"], conversation["speaker_b"]), observations)
    return out


def sessions(conversation: Conversation) -> dict[int, list[Turn]]:
    out: dict[int, list[Turn]] = {}
    for turn in conversation.turns:
        out.setdefault(turn.session, []).append(turn)
    return out


async def feed_side(
    stub: pb_grpc.MemoryServiceStub,
    conversation: Conversation,
    side: Side,
    progress: Progress,
    pause_s: float = 0.0,
) -> Fed:
    """Every session of the conversation, in order, as one conversation of this side's scope:
    the user's turns through StartTurn, the other speaker's reply through CompleteTurn (which
    is what starts learning), a session's leading reply through AppendMessages. Each message
    carries its session's time plus one second per turn, so the order holds. `pause_s` after
    each reply is the user reading it before they answer (0: the next turn at once)."""
    fed = Fed(side)
    user = side.username
    for number, turns in sorted(sessions(conversation).items()):
        conversation_id = f"{conversation.sample_id}-session-{number}"
        pending = ""  # the user message waiting for its reply
        for i, turn in enumerate(turns):
            at = timestamp(turn.said_at + timedelta(seconds=i))
            message_id = f"{side.username}-{turn.dia_id}"
            fed.message_turn[message_id] = turn.dia_id
            if turn.speaker == side.user:
                if pending:
                    fed.unanswered += 1  # never happens in LoCoMo (turns alternate)
                t0 = time.perf_counter()
                started = await stub.StartTurn(
                    pb.StartTurnRequest(
                        username=user,
                        graphname=GRAPHNAME,
                        conversation_id=conversation_id,
                        content=turn.text,
                        message_id=message_id,
                        created_at=at,
                    )
                )
                fed.start_s.append(time.perf_counter() - t0)
                pending = started.message.message_id
            elif pending:
                t0 = time.perf_counter()
                await stub.CompleteTurn(
                    pb.CompleteTurnRequest(
                        username=user,
                        graphname=GRAPHNAME,
                        conversation_id=conversation_id,
                        content=turn.text,
                        parent_id=pending,
                        message_id=message_id,
                        created_at=at,
                    )
                )
                fed.complete_s.append(time.perf_counter() - t0)
                pending = ""
                if pause_s:
                    await asyncio.sleep(pause_s)
            else:
                await stub.AppendMessages(
                    pb.AppendMessagesRequest(
                        username=user,
                        graphname=GRAPHNAME,
                        conversation_id=conversation_id,
                        messages=[
                            pb.NewMessage(
                                role=pb.ROLE_ASSISTANT,
                                content=turn.text,
                                message_id=message_id,
                                created_at=at,
                            )
                        ],
                    )
                )
                fed.imported += 1
            progress.step()
        if pending:
            fed.unanswered += 1
    return fed


# --- the server's metrics: the signal that learning is done ----------------------------------


def metrics_url(log_lines: Sequence[str]) -> str:
    for line in log_lines:
        if found := _METRICS_AT.search(line):
            return found[1]
    raise RuntimeError("the server logged no metrics address (pass --metrics-address)")


def scrape(url: str) -> dict[str, float]:
    """name{labels} -> value from the Prometheus text format."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if found := _METRIC_LINE.match(line):
            out[found[1] + (found[2] or "")] = float(found[3])
    return out


async def wait_until_learned(url: str, timeout_s: float) -> dict[str, float]:
    """Polls the server's metrics until no turn is still learning and the outbox has put every
    fact change into the vector index; returns the last scrape. Every CompleteTurn has queued
    its learning before it answered, so once all replies are in, 0 pending means done."""
    deadline = time.monotonic() + timeout_s
    while True:
        values = await asyncio.to_thread(scrape, url)
        if (
            values.get("graphrag_memory_learning_pending") == 0
            and values.get("graphrag_memory_outbox_pending") == 0
            and values.get("graphrag_memory_mailbox_depth") == 0
        ):
            return values
        if time.monotonic() > deadline:
            raise RuntimeError(f"learning did not finish within {timeout_s}s: {values}")
        await asyncio.sleep(0.2)

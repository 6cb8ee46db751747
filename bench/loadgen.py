"""The load driver: one scenario per process, started by turns.py so that client and server
never share an interpreter.

It talks to the server over grpc.aio from N worker coroutines on one event loop, each looping
until the phase ends, spread round-robin over `channels` channels (default one: GraphRAG's app
process holds one channel and HTTP/2 multiplexes the calls on it). It writes JSON lines on
stdout: {"event": "measure_start"} and {"event": "measure_end"} around the measured window
(turns.py samples CPU times there), then {"event": "result", ...}.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from latency import Recorder
from texts import ANSWERS, QUESTIONS

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

T = TypeVar("T")
RPC_TIMEOUT_S = 30.0
MODEL = "gpt-4o-mini"
GRAPH = "Finance"
HEALTH, START, COMPLETE, PAIR = "Health/Check", "StartTurn", "CompleteTurn", "TurnPair"
START_OTHER, START_HOT = "StartTurn (other scopes)", "StartTurn (hot scope)"


class ConversationFields(TypedDict):
    """The fields that name a conversation in StartTurn, CompleteTurn and AppendMessages."""

    username: str
    graphname: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class Conversation:
    username: str
    conversation_id: str

    def scope(self) -> ConversationFields:
        return {
            "username": self.username,
            "graphname": GRAPH,
            "conversation_id": self.conversation_id,
        }


@dataclass(frozen=True, slots=True)
class DriveOptions:
    target: str
    scenario: str  # floor | turns | iso-alone | iso-hot
    concurrency: int
    duration_s: float
    warmup_s: float
    channels: int
    seed_turns: int
    hot_writers: int


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


async def timed(
    rec: Recorder, rpc: str, method: Callable[..., Awaitable[T]], request: object
) -> T | None:
    """One call, its latency recorded under `rpc`; None (and the status code counted) on error."""
    began = time.perf_counter()
    try:
        result = await method(request, timeout=RPC_TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        rec.record(rpc, began, time.perf_counter(), exc.code().name)
        return None
    rec.record(rpc, began, time.perf_counter())
    return result


async def health_worker(rec: Recorder, channel: grpc.aio.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest()
    while rec.running():
        await timed(rec, HEALTH, stub.Check, request)


async def turn_worker(
    rec: Recorder, channel: grpc.aio.Channel, conv: Conversation, offset: int, notes: list[int]
) -> None:
    """GraphRAG's turn: StartTurn (user message + context), then CompleteTurn (the reply)."""
    stub = pb_grpc.MemoryServiceStub(channel)
    for i in itertools.count(offset):
        if not rec.running():
            return
        began = time.perf_counter()
        start = pb.StartTurnRequest(**conv.scope(), content=QUESTIONS[i % len(QUESTIONS)])
        started = await timed(rec, START, stub.StartTurn, start)
        if started is None:
            continue
        notes.append(started.context.total_tokens)
        reply = pb.CompleteTurnRequest(
            **conv.scope(),
            content=ANSWERS[i % len(ANSWERS)],
            model=MODEL,
            parent_id=started.message.message_id,
            response_time_seconds=2.4,
        )
        done = await timed(rec, COMPLETE, stub.CompleteTurn, reply)
        if done is not None:
            rec.record(PAIR, began, time.perf_counter())


async def start_worker(
    rec: Recorder, channel: grpc.aio.Channel, conv: Conversation, rpc: str, offset: int
) -> None:
    """StartTurn alone in a loop (the isolation scenario)."""
    stub = pb_grpc.MemoryServiceStub(channel)
    for i in itertools.count(offset):
        if not rec.running():
            return
        start = pb.StartTurnRequest(**conv.scope(), content=QUESTIONS[i % len(QUESTIONS)])
        await timed(rec, rpc, stub.StartTurn, start)


async def seed(channel: grpc.aio.Channel, convs: list[Conversation], turns: int) -> None:
    """Gives every conversation the same prior history, so each phase starts alike."""
    if turns <= 0:
        return
    stub = pb_grpc.MemoryServiceStub(channel)
    history = [
        message
        for i in range(turns)
        for message in (
            pb.NewMessage(role=pb.ROLE_USER, content=QUESTIONS[i % len(QUESTIONS)]),
            pb.NewMessage(role=pb.ROLE_ASSISTANT, content=ANSWERS[i % len(ANSWERS)], model=MODEL),
        )
    ]
    gate = asyncio.Semaphore(16)

    async def one(conv: Conversation) -> None:
        async with gate:
            await stub.AppendMessages(
                pb.AppendMessagesRequest(**conv.scope(), messages=history), timeout=60
            )

    await asyncio.gather(*(one(c) for c in convs))


def conversations(prefix: str, count: int, *, one_scope: bool) -> list[Conversation]:
    """`count` conversations: all in one scope (one user), or each in a scope of its own."""
    tag = uuid.uuid4().hex[:8]
    return [
        Conversation(f"{prefix}-{tag}" if one_scope else f"{prefix}-{tag}-{i}", str(uuid.uuid4()))
        for i in range(count)
    ]


async def drive(opts: DriveOptions) -> None:
    channels = [grpc.aio.insecure_channel(opts.target) for _ in range(opts.channels)]
    try:
        for channel in channels:
            await asyncio.wait_for(channel.channel_ready(), 30)
        ch = itertools.cycle(channels)
        n = opts.concurrency
        if opts.scenario == "turns":
            convs = conversations("bench-user", n, one_scope=False)
            await seed(channels[0], convs, opts.seed_turns)
        elif opts.scenario in ("iso-alone", "iso-hot"):
            others = conversations("iso-user", n, one_scope=False)
            hot = conversations("hot-user", opts.hot_writers, one_scope=True)
            if opts.scenario == "iso-alone":
                hot = []
            await seed(channels[0], others + hot, opts.seed_turns)
        elif opts.scenario != "floor":
            raise SystemExit(f"unknown scenario {opts.scenario!r}")

        now = time.perf_counter()
        rec = Recorder(now + opts.warmup_s, now + opts.warmup_s + opts.duration_s)
        context_tokens: list[int] = []
        workers: list[Coroutine[Any, Any, None]]
        if opts.scenario == "floor":
            workers = [health_worker(rec, next(ch)) for _ in range(n)]
        elif opts.scenario == "turns":
            workers = [
                turn_worker(rec, next(ch), v, i, context_tokens) for i, v in enumerate(convs)
            ]
        else:
            workers = [
                start_worker(rec, next(ch), v, name, i)
                for group, name in ((others, START_OTHER), (hot, START_HOT))
                for i, v in enumerate(group)
            ]

        async def markers() -> None:
            await asyncio.sleep(opts.warmup_s)
            emit({"event": "measure_start"})
            await asyncio.sleep(max(0.0, rec.end - time.perf_counter()))
            emit({"event": "measure_end"})

        await asyncio.gather(markers(), *workers)
        notes: dict[str, int] = {}
        if context_tokens:
            notes["mean_context_tokens"] = round(sum(context_tokens) / len(context_tokens))
        emit(
            {
                "event": "result",
                "scenario": opts.scenario,
                "concurrency": n,
                "hot_writers": opts.hot_writers if opts.scenario == "iso-hot" else 0,
                "window_s": opts.duration_s,
                "rpcs": rec.summary(),
                "notes": notes,
            }
        )
    finally:
        for channel in channels:
            await channel.close()


def run(opts: DriveOptions) -> None:
    asyncio.run(drive(opts))

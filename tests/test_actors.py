"""Per-scope actors: order, isolation between scopes, bounded mailboxes, eviction, draining."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.actors import ActorRegistry
from memory_server.memory.errors import Overloaded, Unavailable
from memory_server.memory.identity import Scope

from conftest import RunningServer, ServerFactory, all_messages, assert_eventually, new_id

A = Scope("alice", "Finance")
B = Scope("bob", "Finance")


@pytest.mark.parametrize("writers", [1, 10, 100])
async def test_jobs_run_in_acceptance_order(writers: int):
    async with ActorRegistry(mailbox_size=256, idle_seconds=60) as registry:
        ran: list[int] = []

        def job(i: int):  # type: ignore[no-untyped-def]
            async def write() -> int:
                await asyncio.sleep(0)  # yield, so interleaving would show if it could happen
                ran.append(i)
                return i

            return write

        # Each run() enqueues synchronously when its task starts; tasks start in creation order.
        results = await asyncio.gather(*(registry.run(A, job(i)) for i in range(writers)))
        assert results == list(range(writers))
        assert ran == list(range(writers))


async def test_a_stuck_scope_does_not_block_another():
    async with ActorRegistry(mailbox_size=8, idle_seconds=60) as registry:
        release = asyncio.Event()

        async def stuck() -> str:
            await release.wait()
            return "a"

        blocked = asyncio.ensure_future(registry.run(A, stuck))
        assert await asyncio.wait_for(registry.run(B, lambda: asyncio.sleep(0, "b")), 2) == "b"
        assert not blocked.done()
        release.set()
        assert await blocked == "a"


async def test_full_mailbox_is_overloaded_and_errors_reach_the_caller():
    async with ActorRegistry(mailbox_size=1, idle_seconds=60) as registry:
        release = asyncio.Event()

        async def wait() -> None:
            await release.wait()

        first = asyncio.ensure_future(registry.run(A, wait))
        await asyncio.sleep(0)  # the actor takes the first job, the mailbox is empty again
        second = asyncio.ensure_future(registry.run(A, wait))
        await asyncio.sleep(0)
        with pytest.raises(Overloaded):
            await registry.run(A, wait)
        release.set()
        await asyncio.gather(first, second)

        async def boom() -> None:
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            await registry.run(A, boom)
        assert await registry.run(A, lambda: asyncio.sleep(0, "still alive")) == "still alive"


async def test_idle_actors_are_evicted_and_recreated():
    async with ActorRegistry(mailbox_size=4, idle_seconds=0.05) as registry:
        await registry.run(A, lambda: asyncio.sleep(0))
        assert registry.actors_alive == 1

        async def evicted() -> bool:
            return registry.actors_alive == 0

        await assert_eventually(evicted, timeout_s=5, what="idle eviction")
        assert await registry.run(A, lambda: asyncio.sleep(0, 7)) == 7


async def test_close_drains_accepted_jobs_then_refuses():
    registry = ActorRegistry(mailbox_size=64, idle_seconds=60)
    await registry.close()  # safe before start
    registry = ActorRegistry(mailbox_size=64, idle_seconds=60)
    await registry.start()
    done: list[int] = []

    def job(i: int):  # type: ignore[no-untyped-def]
        async def write() -> None:
            await asyncio.sleep(0.001)
            done.append(i)

        return write

    futures = [asyncio.ensure_future(registry.run(A, job(i))) for i in range(20)]
    await asyncio.sleep(0)
    await registry.close()
    await asyncio.gather(*futures)
    assert done == list(range(20))
    with pytest.raises(Unavailable):
        await registry.run(A, job(99))
    await registry.close()  # idempotent


async def test_hundred_concurrent_writers_on_one_conversation_are_serialized(
    memory: RunningServer, scope: dict[str, str]
):
    conversation = new_id()
    await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content="opening")
    )
    responses = await asyncio.gather(
        *(
            memory.stub.StartTurn(
                pb.StartTurnRequest(**scope, conversation_id=conversation, content=f"writer {i}")
            )
            for i in range(100)
        )
    )
    stored = await all_messages(memory.stub, scope, conversation)
    assert len(stored) == 101
    order = [m.message_id for m in stored]
    # Each turn's context is exactly the messages accepted before it: a chain of prefixes of
    # the stored order, one per length. Interleaved writes would repeat or skip a length.
    lengths = []
    for response in responses:
        seen = [m.message_id for m in response.context.recent_messages]
        assert seen == order[: len(seen)]
        assert order[len(seen)] == response.message.message_id
        lengths.append(len(seen))
    assert sorted(lengths) == list(range(1, 101))


async def test_full_mailbox_answers_resource_exhausted(
    start_server: ServerFactory, scope: dict[str, str]
):
    memory = await start_server(mailbox_size=1)
    conversation = new_id()
    results = await asyncio.gather(
        *(
            memory.stub.StartTurn(
                pb.StartTurnRequest(**scope, conversation_id=conversation, content=f"burst {i}")
            )
            for i in range(40)
        ),
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    accepted = [r for r in results if isinstance(r, pb.StartTurnResponse)]
    assert refused, "a mailbox of one cannot hold a burst of 40"
    assert {r.code() for r in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert "mailbox" in (refused[0].details() or "")
    stored = await all_messages(memory.stub, scope, conversation)
    assert sorted(m.message_id for m in stored) == sorted(r.message.message_id for r in accepted)


async def test_batched_jobs_queued_back_to_back_run_as_one_call_in_order():
    async with ActorRegistry(mailbox_size=64, idle_seconds=60) as registry:
        release = asyncio.Event()
        calls: list[list[int]] = []
        ran: list[str] = []

        async def blocker() -> None:
            await release.wait()

        async def batch(items: list[int]) -> list[int | Exception]:
            calls.append(items)
            ran.extend(f"b{i}" for i in items)
            return [ValueError(f"no {i}") if i == 3 else i * 10 for i in items]

        async def plain() -> str:
            ran.append("plain")
            return "plain"

        first = asyncio.ensure_future(registry.run(A, blocker))
        await asyncio.sleep(0)
        batched = [asyncio.ensure_future(registry.run_batched(A, "k", i, batch)) for i in range(5)]
        between = asyncio.ensure_future(registry.run(A, plain))
        after = [asyncio.ensure_future(registry.run_batched(A, "k", i, batch)) for i in (5, 6)]
        other_key = asyncio.ensure_future(registry.run_batched(A, "other", 7, batch))
        await asyncio.sleep(0)
        assert registry.mailbox_depth() == 9
        release.set()
        await first
        assert [await b for b in batched[:3]] == [0, 10, 20]
        with pytest.raises(ValueError, match="no 3"):  # its own answer, to its caller only
            await batched[3]
        assert await batched[4] == 40
        assert await between == "plain"
        assert [await a for a in after] == [50, 60]
        assert await other_key == 70
        # Nothing changed places with the plain job, and another key is another batch.
        assert calls == [[0, 1, 2, 3, 4], [5, 6], [7]]
        assert ran == ["b0", "b1", "b2", "b3", "b4", "plain", "b5", "b6", "b7"]


async def test_a_batch_leaves_out_callers_that_gave_up_and_its_error_reaches_the_rest():
    async with ActorRegistry(mailbox_size=64, idle_seconds=60) as registry:
        release = asyncio.Event()
        seen: list[list[str]] = []

        async def blocker() -> None:
            await release.wait()

        async def failing(items: list[str]) -> list[str]:
            seen.append(items)
            raise Unavailable("database down")

        first = asyncio.ensure_future(registry.run(A, blocker))
        await asyncio.sleep(0)
        calls = {i: asyncio.ensure_future(registry.run_batched(A, "k", i, failing)) for i in "xyz"}
        await asyncio.sleep(0)
        calls["y"].cancel()  # its caller's deadline passed while it waited
        release.set()
        await first
        for i in "xz":
            with pytest.raises(Unavailable, match="database down"):
                await calls[i]
        assert seen == [["x", "z"]]

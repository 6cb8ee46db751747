"""The typed clients (memory_client.client) against real servers, and against a scripted
in-test server where the server's side of a call has to be observed (retries, metadata)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from memory_client import (
    AsyncMemoryClient,
    InvalidArgumentError,
    MemoryClient,
    MemoryClientError,
    NotFoundError,
    UnavailableError,
)
from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

from conftest import RunningServer, ServerFactory, new_id

RETRY_LOGGER = "memory_client.client"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _retries_logged(caplog: pytest.LogCaptureFixture, method: str) -> int:
    return sum(
        1
        for record in caplog.records
        if record.name == RETRY_LOGGER and record.getMessage().startswith(f"{method}: UNAVAILABLE")
    )


async def test_add_fact_with_a_valid_time_from_both_clients(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    async with AsyncMemoryClient(memory.address) as client:
        added = await client.add_fact(**scope, text="Went hiking yesterday", valid_time=said)
    assert added.fact.valid_from.ToDatetime(UTC) == said
    assert added.fact.event_period == "day"

    def sync_add() -> pb.AddFactResponse:
        with MemoryClient(memory.address) as client:
            return client.add_fact(**scope, text="Moved to Oslo in 2021", valid_time=said)

    moved = await asyncio.to_thread(sync_add)
    assert moved.fact.valid_from.ToDatetime(UTC) == said and moved.fact.event_period == "year"
    with pytest.raises(ValueError, match="timezone-aware"):
        async with AsyncMemoryClient(memory.address) as client:
            await client.add_fact(**scope, text="x", valid_time=datetime(2023, 5, 8))


async def test_async_client_turn_round_trip(memory: RunningServer, scope: dict[str, str]) -> None:
    conversation_id = new_id()
    async with AsyncMemoryClient(memory.address) as client:
        assert await client.health()
        assert await client.health("")
        started = await client.start_turn(
            **scope,
            conversation_id=conversation_id,
            content="What is our Q3 revenue?",
            conversation_name="Revenue",
        )
        assert started.conversation_created
        assert started.message.role == pb.ROLE_USER
        completed = await client.complete_turn(
            **scope,
            conversation_id=conversation_id,
            content="Q3 revenue was 12M.",
            model="gpt-4o-mini",
            parent_id=started.message.message_id,
            response_time_seconds=0.5,
        )
        assert completed.message.parent_id == started.message.message_id

        context = await client.get_context(
            **scope, conversation_id=conversation_id, question="And Q4?"
        )
        assert context.conversation_exists
        assert [m.content for m in context.context.recent_messages] == [
            "What is our Q3 revenue?",
            "Q3 revenue was 12M.",
        ]
        conversation = await client.get_conversation(**scope, conversation_id=conversation_id)
        assert conversation.conversation.name == "Revenue"
        assert len(conversation.messages) == 2
        listed = await client.list_conversations(**scope)
        assert [c.conversation_id for c in listed.conversations] == [conversation_id]


async def test_sync_client_turn_round_trip(memory: RunningServer, scope: dict[str, str]) -> None:
    conversation_id = new_id()

    def run() -> tuple[pb.StartTurnResponse, pb.GetConversationResponse, bool]:
        with MemoryClient(memory.address) as client:
            healthy = client.health()
            started = client.start_turn(
                **scope, conversation_id=conversation_id, content="Hello", message_id="m-user-1"
            )
            client.complete_turn(
                **scope,
                conversation_id=conversation_id,
                content="Hi there",
                parent_id=started.message.message_id,
                message_id="m-assistant-1",
            )
            # The same client-chosen id again: the server answers with the first result.
            again = client.start_turn(
                **scope, conversation_id=conversation_id, content="Hello", message_id="m-user-1"
            )
            assert again.message.message_id == started.message.message_id
            return (
                started,
                client.get_conversation(**scope, conversation_id=conversation_id),
                healthy,
            )

    started, conversation, healthy = await asyncio.to_thread(run)
    assert healthy
    assert started.message.message_id == "m-user-1"
    assert [m.message_id for m in conversation.messages] == ["m-user-1", "m-assistant-1"]


async def test_errors_map_to_memory_client_error(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    async with AsyncMemoryClient(memory.address) as client:
        with pytest.raises(InvalidArgumentError) as bad:
            await client.start_turn(
                username=" padded", graphname="Finance", conversation_id=new_id(), content="hi"
            )
        assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert bad.value.method == "StartTurn"
        assert "username" in bad.value.details
        assert isinstance(bad.value.__cause__, grpc.aio.AioRpcError)

        with pytest.raises(NotFoundError) as missing:
            await client.get_conversation(**scope, conversation_id=new_id())
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
        assert missing.value.method == "GetConversation"

    def sync_missing() -> MemoryClientError:
        with MemoryClient(memory.address) as client:
            try:
                client.rename_conversation(**scope, conversation_id=new_id(), name="x")
            except MemoryClientError as exc:
                return exc
        raise AssertionError("RenameConversation of an unknown conversation succeeded")

    error = await asyncio.to_thread(sync_missing)
    assert isinstance(error, NotFoundError)
    assert error.code == grpc.StatusCode.NOT_FOUND
    assert error.method == "RenameConversation"


async def test_idempotent_read_retries_until_the_server_is_up(
    start_server: ServerFactory, scope: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=RETRY_LOGGER)
    port = _free_port()
    async with AsyncMemoryClient(
        f"127.0.0.1:{port}", retries=10, backoff_s=0.1, timeout_s=20.0
    ) as client:
        call = asyncio.create_task(client.list_conversations(**scope))
        await asyncio.sleep(0.5)
        assert not call.done()  # refused, backing off
        await start_server(listen_address=f"127.0.0.1:{port}")
        listed = await call
    assert list(listed.conversations) == []
    assert _retries_logged(caplog, "ListConversations") >= 1


async def test_non_idempotent_write_is_not_retried(
    start_server: ServerFactory, scope: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=RETRY_LOGGER)
    port = _free_port()
    conversation_id = new_id()
    async with AsyncMemoryClient(f"127.0.0.1:{port}", retries=10, backoff_s=0.1) as client:
        with pytest.raises(UnavailableError) as down:
            await client.start_turn(**scope, conversation_id=conversation_id, content="lost?")
        assert down.value.code == grpc.StatusCode.UNAVAILABLE
        assert down.value.method == "StartTurn"
        assert _retries_logged(caplog, "StartTurn") == 0

        server = await start_server(listen_address=f"127.0.0.1:{port}")
        await asyncio.sleep(0.5)  # a retry, had there been one, would have landed by now
        with pytest.raises(NotFoundError):
            await client.get_conversation(**scope, conversation_id=conversation_id)
    assert server.address == f"127.0.0.1:{port}"


# --- A scripted server: counts attempts and records metadata --------------------------------


@dataclass
class Script:
    unavailable_before_success: int = 0
    # What the failing attempts answer.
    failure: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    delay_s: float = 0.0
    time_remaining: list[float] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    metadata: list[dict[str, str]] = field(default_factory=list)


class ScriptedMemory(pb_grpc.MemoryServiceServicer):
    """Each RPC fails UNAVAILABLE `unavailable_before_success` times, then answers empty."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def _answer(self, name: str, context: Any, response: Any) -> Any:
        self.script.calls[name] = self.script.calls.get(name, 0) + 1
        self.script.metadata.append(
            {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}
        )
        self.script.time_remaining.append(context.time_remaining())
        await asyncio.sleep(self.script.delay_s)
        if self.script.calls[name] <= self.script.unavailable_before_success:
            await context.abort(self.script.failure, "scripted outage")
        return response

    async def GetContext(self, request: Any, context: Any) -> Any:
        return await self._answer("GetContext", context, pb.GetContextResponse())

    async def StartTurn(self, request: Any, context: Any) -> Any:
        return await self._answer("StartTurn", context, pb.StartTurnResponse())

    async def AppendMessages(self, request: Any, context: Any) -> Any:
        return await self._answer("AppendMessages", context, pb.AppendMessagesResponse())

    async def AddFact(self, request: Any, context: Any) -> Any:
        return await self._answer("AddFact", context, pb.AddFactResponse())


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[str, Script]]:
    script = Script()
    server = grpc.aio.server()
    pb_grpc.add_MemoryServiceServicer_to_server(ScriptedMemory(script), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", script
    finally:
        await server.stop(None)


SCOPE = {"username": "alice", "graphname": "Finance"}


async def test_a_cancelled_the_client_did_not_cause_is_retried_like_unavailable(
    scripted: tuple[str, Script],
) -> None:
    """gRPC cancels the calls that reached a stopping server's transport but not its handler
    (the server answers every other call UNAVAILABLE): an idempotent call is sent again, a
    call that is not stays failed, and a call the caller cancels is not repeated."""
    address, script = scripted
    script.unavailable_before_success = 2
    script.failure = grpc.StatusCode.CANCELLED
    async with AsyncMemoryClient(address, retries=3, backoff_s=0.01) as client:
        await client.get_context(**SCOPE, conversation_id="c")
        assert script.calls["GetContext"] == 3
        await client.start_turn(**SCOPE, conversation_id="c", content="hi", message_id="m1")
        assert script.calls["StartTurn"] == 3
        with pytest.raises(MemoryClientError) as raised:
            await client.add_fact(**SCOPE, text="likes tea")
        assert raised.value.code == grpc.StatusCode.CANCELLED
        assert script.calls["AddFact"] == 1

        script.calls.clear()
        script.delay_s = 5.0
        call = asyncio.ensure_future(client.get_context(**SCOPE, conversation_id="c"))
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0.3)
        assert script.calls["GetContext"] == 1


async def test_retry_rules_per_rpc(scripted: tuple[str, Script]) -> None:
    address, script = scripted
    script.unavailable_before_success = 2
    async with AsyncMemoryClient(address, retries=3, backoff_s=0.01) as client:
        await client.get_context(**SCOPE, conversation_id="c")
        assert script.calls["GetContext"] == 3  # two outages, then the answer

        with pytest.raises(UnavailableError):
            await client.start_turn(**SCOPE, conversation_id="c", content="hi")
        assert script.calls["StartTurn"] == 1  # no client-chosen id: never repeated
        script.calls.clear()
        await client.start_turn(**SCOPE, conversation_id="c", content="hi", message_id="m1")
        assert script.calls["StartTurn"] == 3

        mixed = [
            pb.NewMessage(role=pb.ROLE_USER, content="a", message_id="m2"),
            pb.NewMessage(role=pb.ROLE_ASSISTANT, content="b"),
        ]
        with pytest.raises(UnavailableError):
            await client.append_messages(**SCOPE, conversation_id="c", messages=mixed)
        assert script.calls["AppendMessages"] == 1
        script.calls.clear()
        mixed[1].message_id = "m3"
        await client.append_messages(**SCOPE, conversation_id="c", messages=mixed)
        assert script.calls["AppendMessages"] == 3

        with pytest.raises(UnavailableError):
            await client.add_fact(**SCOPE, text="likes tea")
        assert script.calls["AddFact"] == 1

    # Retries run out: 1 + retries attempts, then the UNAVAILABLE surfaces.
    script.calls.clear()
    script.unavailable_before_success = 100

    def sync_exhausted() -> MemoryClientError:
        with MemoryClient(address, retries=2, backoff_s=0.01) as client:
            try:
                client.get_context(**SCOPE, conversation_id="c")
            except MemoryClientError as exc:
                return exc
        raise AssertionError("an endless outage was answered")

    error = await asyncio.to_thread(sync_exhausted)
    assert error.code == grpc.StatusCode.UNAVAILABLE
    assert script.calls["GetContext"] == 3


async def test_bearer_token_is_sent_on_every_call(scripted: tuple[str, Script]) -> None:
    address, script = scripted
    async with AsyncMemoryClient(address, token="s3cret") as client:
        await client.get_context(**SCOPE, conversation_id="c")
        await client.start_turn(**SCOPE, conversation_id="c", content="hi")

    def sync_call() -> None:
        with MemoryClient(address, token="sync-token") as client:
            client.get_context(**SCOPE, conversation_id="c")

    await asyncio.to_thread(sync_call)
    async with AsyncMemoryClient(address) as anonymous:
        await anonymous.get_context(**SCOPE, conversation_id="c")

    assert [m.get("authorization") for m in script.metadata] == [
        "Bearer s3cret",
        "Bearer s3cret",
        "Bearer sync-token",
        None,
    ]


async def test_deadline_is_applied(scripted: tuple[str, Script]) -> None:
    address, script = scripted
    async with AsyncMemoryClient(address, timeout_s=7.0) as client:
        await client.get_context(**SCOPE, conversation_id="c")
        await client.get_context(**SCOPE, conversation_id="c", timeout_s=3.0)
        # The deadline reaches the server: the constructor's, then the call's own.
        assert 6.0 < script.time_remaining[0] <= 7.1  # the wire rounds deadlines up
        assert 2.0 < script.time_remaining[1] <= 3.1

        script.delay_s = 1.0
        with pytest.raises(MemoryClientError) as slow:
            await client.get_context(**SCOPE, conversation_id="c", timeout_s=0.05)
        assert slow.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert slow.value.method == "GetContext"

    def sync_deadline() -> grpc.StatusCode:
        with MemoryClient(address, timeout_s=0.05) as client:
            try:
                client.get_context(**SCOPE, conversation_id="c")
            except MemoryClientError as exc:
                return exc.code
        raise AssertionError("a 50 ms deadline was met by a 1 s answer")

    assert await asyncio.to_thread(sync_deadline) == grpc.StatusCode.DEADLINE_EXCEEDED

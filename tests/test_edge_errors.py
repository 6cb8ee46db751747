"""What the edge answers when a request cannot be served as sent: bytes that are not the method's
message, out-of-range Timestamps, a request over the size limit, and an exception nothing maps
(a bug): each gets a status and a message a client can act on, and nothing is written."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import asyncpg
import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, all_messages, assert_eventually, new_id
from proto_strategies import length_delimited

START_TURN = "/graphrag.memory.v1.MemoryService/StartTurn"


def _rpcs(server: RunningServer, method: str, code: str) -> float:
    value = server.server.metrics.registry.get_sample_value(
        "graphrag_memory_rpc_requests_total", {"method": method, "code": code}
    )
    return value or 0.0


def _counted(
    server: RunningServer, method: str, code: str, expected: float
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return _rpcs(server, method, code) == expected

    return check


async def _raw_call(server: RunningServer, method: str, payload: bytes) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await server.channel.unary_unary(method)(payload)
    return err.value


async def test_a_string_field_that_is_not_utf8_is_invalid_argument(
    memory: RunningServer, scope: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    conversation = new_id()
    valid = pb.StartTurnRequest(**scope, conversation_id=conversation, content="x")
    content_field = pb.StartTurnRequest.DESCRIPTOR.fields_by_name["content"].number
    # The last occurrence of a field wins on the wire: content's bytes are ff fe c3 28.
    payload = valid.SerializeToString() + length_delimited(content_field, b"\xff\xfe\xc3\x28")
    before = _rpcs(memory, "StartTurn", "INVALID_ARGUMENT")
    with caplog.at_level(logging.INFO):
        err = await _raw_call(memory, START_TURN, payload)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("request is not a valid StartTurnRequest: ")
    # grpc.aio's abort sends the status before the interceptor records it: wait for the count.
    await assert_eventually(
        _counted(memory, "StartTurn", "INVALID_ARGUMENT", before + 1), what="the metric"
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    listed = await memory.stub.ListConversations(pb.ListConversationsRequest(**scope))
    assert list(listed.conversations) == []


@pytest.mark.parametrize(
    "payload",
    [b"\xff", b"\x0a\x05ab", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0f"],
    ids=["garbage", "length-past-the-end", "varint-too-long", "bad-wire-type"],
)
async def test_undecodable_requests_on_every_service(memory: RunningServer, payload: bytes):
    for method in (START_TURN, "/grpc.health.v1.Health/Check"):
        err = await _raw_call(memory, method, payload)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, err.details())
        assert "request is not a valid" in (err.details() or "")
    # Health Watch (a stream) decodes through the same path.
    watch = memory.channel.unary_stream("/grpc.health.v1.Health/Watch")(payload)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in watch:
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reply = await memory.health.Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


BAD_TIMESTAMPS = [
    (Timestamp(seconds=253402300799, nanos=1_000_000_000), "nanos is 1000000000"),
    (Timestamp(seconds=2**62), "seconds is 4611686018427387904"),
    (Timestamp(seconds=0, nanos=-5), "nanos is -5"),
    (Timestamp(seconds=-62135596801), "0001-01-01T00:00:00Z"),
    (Timestamp(seconds=253402300800), "9999-12-31T23:59:59Z"),
]


@pytest.mark.parametrize(("stamp", "problem"), BAD_TIMESTAMPS)
@pytest.mark.parametrize("field", ["as_of_valid_time", "as_of_transaction_time"])
async def test_out_of_range_as_of_is_invalid_argument(
    memory: RunningServer, scope: dict[str, str], field: str, stamp: Timestamp, problem: str
) -> None:
    for call in (
        memory.stub.ListFacts(pb.ListFactsRequest(**scope, **{field: stamp})),
        memory.stub.SearchFacts(pb.SearchFactsRequest(**scope, query="tea", **{field: stamp})),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = err.value.details() or ""
        assert details.startswith(f"{field}: ") and problem in details, details


async def test_the_timestamp_range_is_accepted_to_its_edges(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Prefers tea over coffee."))
    first, last = Timestamp(seconds=-62135596800), Timestamp(seconds=253402300799, nanos=999999999)
    before = await memory.stub.ListFacts(pb.ListFactsRequest(**scope, as_of_valid_time=first))
    assert list(before.facts) == []
    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope, as_of_transaction_time=last))
    assert [f.text for f in listed.facts] == ["Prefers tea over coffee."]
    conversation = new_id()
    old = pb.NewMessage(role=pb.ROLE_USER, content="from year one", created_at=first)
    new = pb.NewMessage(role=pb.ROLE_ASSISTANT, content="to year 9999", created_at=last)
    await memory.stub.AppendMessages(
        pb.AppendMessagesRequest(**scope, conversation_id=conversation, messages=[old, new])
    )
    stored = await all_messages(memory.stub, scope, conversation)
    assert [m.created_at.seconds for m in stored] == [first.seconds, last.seconds]


async def test_a_bad_created_at_writes_none_of_the_batch(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    conversation = new_id()
    messages = [
        pb.NewMessage(role=pb.ROLE_USER, content="fine"),
        pb.NewMessage(role=pb.ROLE_USER, content="bad", created_at=Timestamp(nanos=-1)),
    ]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.AppendMessages(
            pb.AppendMessagesRequest(**scope, conversation_id=conversation, messages=messages)
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("messages[1].created_at: nanos is -1")
    listed = await memory.stub.ListConversations(pb.ListConversationsRequest(**scope))
    assert list(listed.conversations) == []


async def test_a_request_over_max_request_bytes_is_resource_exhausted(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    server = await start_server(max_request_bytes=128 * 1024)
    conversation = new_id()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await server.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="x" * 200_000)
        )
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "131072" in (err.value.details() or ""), err.value.details()
    # Under the gRPC limit but over max_message_bytes: the field's own limit, named.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await server.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="x" * 100_000)
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "content: is 100000 bytes; the limit is 65536"
    # The connection survived both: the same channel serves the next call.
    turn = await server.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content="hello")
    )
    assert turn.conversation_created


async def test_an_unmapped_exception_is_internal_with_the_request_id_logged_once(
    start_server: ServerFactory,
    fresh_database_url: str,
    scope: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await start_server(database_url=fresh_database_url)
    # A schema someone changed by hand: the stored function StartTurn calls is gone. Nothing
    # maps that SQLSTATE (42883), so it is a bug as far as a caller can tell.
    admin = await asyncpg.connect(fresh_database_url)
    try:
        await admin.execute("ALTER FUNCTION memory_append_message RENAME TO moved_away")
    finally:
        await admin.close()
    request_id = f"req-{new_id()}"
    with caplog.at_level(logging.ERROR, logger="memory_server"):
        call = server.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=new_id(), content="hello"),
            metadata=(("x-request-id", request_id),),
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert err.value.details() == f"internal error (request id {request_id})"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert request_id in errors[0].getMessage() and errors[0].exc_info is not None
    await assert_eventually(_counted(server, "StartTurn", "INTERNAL", 1), what="the metric")


async def test_a_page_of_long_messages_stays_under_the_response_limit(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    server = await start_server(max_request_bytes=128 * 1024)
    conversation = new_id()
    for i in range(3):
        await server.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content=f"{i}" + "é" * 30000)
        )
    # 3 × 60 KB would pass the 128 KiB response limit: the page is cut short, with a token.
    first = await server.stub.GetConversation(
        pb.GetConversationRequest(**scope, conversation_id=conversation, page_size=3)
    )
    assert len(first.messages) == 1 and first.next_page_token
    everything = await all_messages(server.stub, scope, conversation)
    assert [m.content[0] for m in everything] == ["0", "1", "2"]

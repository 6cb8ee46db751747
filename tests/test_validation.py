"""Bad input: the right status, a message naming the field, and nothing written."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, all_messages, new_id

BAD_NAMES = [
    ("", "is required"),
    ("x" * 257, "longer than 256"),
    ("ali\x00ce", "control characters"),
    ("ali\nce", "control characters"),
    ("alice\x7f", "control characters"),
    (" alice", "whitespace"),
    ("alice ", "whitespace"),
]


async def _expect(call: object, code: grpc.StatusCode, field: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call  # type: ignore[misc]
    assert err.value.code() == code, err.value.details()
    assert field in (err.value.details() or ""), err.value.details()


@pytest.mark.parametrize(("value", "problem"), BAD_NAMES)
@pytest.mark.parametrize("field", ["username", "graphname", "conversation_id"])
async def test_bad_identity_is_refused_and_nothing_is_written(
    memory: RunningServer, scope: dict[str, str], field: str, value: str, problem: str
):
    request = {**scope, "conversation_id": new_id(), "content": "hello"}
    request[field] = value
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.StartTurn(pb.StartTurnRequest(**request))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (err.value.details() or "") and problem in (err.value.details() or "")
    page = await memory.stub.ListConversations(pb.ListConversationsRequest(**scope))
    assert list(page.conversations) == []


async def test_nul_inside_names_cannot_merge_scopes(memory: RunningServer):
    # mem0's user id is graphname + "\0" + username: ("a\0b", "c") would collide with ("a", "b\0c").
    await _expect(
        memory.stub.StartTurn(
            pb.StartTurnRequest(username="b\x00c", graphname="a", conversation_id="c", content="hi")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "username",
    )


async def test_content_limits(start_server: ServerFactory, scope: dict[str, str]):
    memory = await start_server(max_message_bytes=2048)
    conversation = new_id()
    await _expect(
        memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="x" * 2049)
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "content",
    )
    await _expect(
        memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="   ")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "content",
    )
    await _expect(
        memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="a\x00b")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "content",
    )
    # Multi-byte text is measured in UTF-8 bytes: 683 × 3 bytes > 2048.
    await _expect(
        memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="€" * 683)
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "content",
    )
    ok = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content="€" * 682)
    )
    assert ok.conversation_created  # the refused calls created nothing before it


async def test_bad_fields_of_other_rpcs(memory: RunningServer, scope: dict[str, str]):
    conversation = new_id()
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content="q")
    )
    stub = memory.stub
    await _expect(
        stub.SubmitFeedback(
            pb.SubmitFeedbackRequest(**scope, message_id=started.message.message_id, feedback=7)
        ),  # type: ignore[arg-type]
        grpc.StatusCode.INVALID_ARGUMENT,
        "feedback",
    )
    await _expect(
        stub.SubmitFeedback(pb.SubmitFeedbackRequest(**scope, message_id="")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "message_id",
    )
    await _expect(
        stub.ListConversations(pb.ListConversationsRequest(**scope, page_size=-1)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "page_size",
    )
    await _expect(
        stub.ListConversations(pb.ListConversationsRequest(**scope, page_token="garbage!")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "page_token",
    )
    await _expect(
        stub.GetConversation(
            pb.GetConversationRequest(
                **scope, conversation_id=conversation, page_token="bm90LWEtbnVtYmVy"
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "page_token",
    )
    await _expect(
        stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope, conversation_id=conversation, content="a", response_time_seconds=-1
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "response_time_seconds",
    )
    await _expect(
        stub.AppendMessages(pb.AppendMessagesRequest(**scope, conversation_id=conversation)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages",
    )
    await _expect(
        stub.AppendMessages(
            pb.AppendMessagesRequest(
                **scope,
                conversation_id=conversation,
                messages=[
                    pb.NewMessage(role=pb.ROLE_USER, content="fine"),
                    pb.NewMessage(role=pb.ROLE_UNSPECIFIED, content="no role"),
                ],
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[1].role",
    )
    await _expect(
        stub.AppendMessages(
            pb.AppendMessagesRequest(
                **scope,
                conversation_id=conversation,
                messages=[
                    pb.NewMessage(role=pb.ROLE_USER, content="a", message_id="dup"),
                    pb.NewMessage(role=pb.ROLE_USER, content="b", message_id="dup"),
                ],
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[1].message_id",
    )
    await _expect(
        stub.RenameConversation(
            pb.RenameConversationRequest(**scope, conversation_id=conversation, name="n" * 513)
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "name",
    )
    assert len(await all_messages(stub, scope, conversation)) == 1


async def test_disabled_memory_keeps_health_serving(
    start_server: ServerFactory, scope: dict[str, str]
):
    memory = await start_server(enabled=False, database_url="")
    status = await memory.health.Check(health_pb2.HealthCheckRequest())
    assert status.status == health_pb2.HealthCheckResponse.SERVING
    await _expect(
        memory.stub.StartTurn(pb.StartTurnRequest(**scope, conversation_id="c", content="hi")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "disabled",
    )
    await _expect(  # refused as disabled before the input is even looked at
        memory.stub.ListConversations(pb.ListConversationsRequest()),
        grpc.StatusCode.FAILED_PRECONDITION,
        "enabled",
    )

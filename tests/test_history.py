"""UI history RPCs and bulk import, including scope isolation (other scopes answer NOT_FOUND)."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, all_messages, new_id


async def _start(
    memory: RunningServer, scope: dict[str, str], conversation: str, text: str, name: str = ""
) -> pb.StartTurnResponse:
    return await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=conversation, content=text, conversation_name=name
        )
    )


async def test_list_conversations_pages_newest_first(memory: RunningServer, scope: dict[str, str]):
    ids = [new_id() for _ in range(7)]
    for i, conversation in enumerate(ids):
        await _start(memory, scope, conversation, f"question {i}", name=f"chat {i}")
    await _start(memory, scope, ids[0], "back to the first chat")  # now the most recent

    seen: list[str] = []
    token = ""
    while True:
        page = await memory.stub.ListConversations(
            pb.ListConversationsRequest(**scope, page_size=3, page_token=token)
        )
        assert len(page.conversations) <= 3
        seen.extend(c.conversation_id for c in page.conversations)
        token = page.next_page_token
        if not token:
            break
    assert seen == [ids[0], *reversed(ids[1:])]
    first = await memory.stub.ListConversations(pb.ListConversationsRequest(**scope))
    assert first.conversations[0].message_count == 2
    assert first.conversations[-1].name == "chat 1"

    other = await memory.stub.ListConversations(
        pb.ListConversationsRequest(username=scope["username"], graphname="OtherGraph")
    )
    assert list(other.conversations) == []


async def test_get_conversation_pages_in_order(memory: RunningServer, scope: dict[str, str]):
    conversation = new_id()
    for i in range(5):
        await _start(memory, scope, conversation, f"message {i}")
    page = await memory.stub.GetConversation(
        pb.GetConversationRequest(**scope, conversation_id=conversation, page_size=2)
    )
    assert [m.content for m in page.messages] == ["message 0", "message 1"]
    rest = await memory.stub.GetConversation(
        pb.GetConversationRequest(
            **scope, conversation_id=conversation, page_size=10, page_token=page.next_page_token
        )
    )
    assert [m.content for m in rest.messages] == ["message 2", "message 3", "message 4"]
    assert rest.next_page_token == ""
    assert rest.conversation.message_count == 5


async def test_feedback_rename_delete(memory: RunningServer, scope: dict[str, str]):
    conversation = new_id()
    started = await _start(memory, scope, conversation, "how many vertices?")
    reply = await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation,
            content="42 vertices.",
            parent_id=started.message.message_id,
        )
    )
    rated = await memory.stub.SubmitFeedback(
        pb.SubmitFeedbackRequest(
            **scope,
            message_id=reply.message.message_id,
            feedback=pb.FEEDBACK_DOWN,
            comment="wrong graph",
        )
    )
    assert rated.message.feedback == pb.FEEDBACK_DOWN
    assert rated.message.comment == "wrong graph"
    stored = await all_messages(memory.stub, scope, conversation)
    assert stored[1].feedback == pb.FEEDBACK_DOWN and stored[1].comment == "wrong graph"

    renamed = await memory.stub.RenameConversation(
        pb.RenameConversationRequest(**scope, conversation_id=conversation, name="Vertex count")
    )
    assert renamed.conversation.name == "Vertex count"

    deleted = await memory.stub.DeleteConversation(
        pb.DeleteConversationRequest(**scope, conversation_id=conversation)
    )
    assert deleted.deleted_messages == 2
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.GetConversation(
            pb.GetConversationRequest(**scope, conversation_id=conversation)
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_other_scopes_get_not_found_and_change_nothing(
    memory: RunningServer, scope: dict[str, str]
):
    conversation = new_id()
    started = await _start(memory, scope, conversation, "private question", name="mine")
    message_id = started.message.message_id
    for intruder in (
        {"username": scope["username"] + "x", "graphname": scope["graphname"]},
        {"username": scope["username"], "graphname": scope["graphname"] + "x"},
    ):
        calls = [
            memory.stub.GetConversation(
                pb.GetConversationRequest(**intruder, conversation_id=conversation)
            ),
            memory.stub.SubmitFeedback(
                pb.SubmitFeedbackRequest(**intruder, message_id=message_id, feedback=pb.FEEDBACK_UP)
            ),
            memory.stub.RenameConversation(
                pb.RenameConversationRequest(
                    **intruder, conversation_id=conversation, name="stolen"
                )
            ),
            memory.stub.DeleteConversation(
                pb.DeleteConversationRequest(**intruder, conversation_id=conversation)
            ),
            memory.stub.CompleteTurn(
                pb.CompleteTurnRequest(**intruder, conversation_id=conversation, content="x")
            ),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            assert "private" not in (err.value.details() or "")
    [stored] = await all_messages(memory.stub, scope, conversation)
    assert stored.feedback == pb.FEEDBACK_NONE
    page = await memory.stub.ListConversations(pb.ListConversationsRequest(**scope))
    assert [c.name for c in page.conversations] == ["mine"]


async def test_append_messages_imports_idempotently(memory: RunningServer, scope: dict[str, str]):
    conversation = new_id()
    when = Timestamp()
    when.FromDatetime(datetime(2025, 3, 1, 12, 0, tzinfo=UTC))
    batch = [
        pb.NewMessage(
            role=pb.ROLE_USER, content="imported question", message_id="old-1", created_at=when
        ),
        pb.NewMessage(
            role=pb.ROLE_ASSISTANT,
            content="imported answer",
            message_id="old-2",
            parent_id="old-1",
            model="gpt-4",
            response_time_seconds=2.5,
            feedback=pb.FEEDBACK_UP,
            comment="great",
        ),
    ]
    request = pb.AppendMessagesRequest(
        **scope, conversation_id=conversation, messages=batch, conversation_name="Imported"
    )
    first = await memory.stub.AppendMessages(request)
    assert (first.inserted, first.skipped, first.conversation_created) == (2, 0, True)
    again = await memory.stub.AppendMessages(request)
    assert (again.inserted, again.skipped, again.conversation_created) == (0, 2, False)
    assert list(again.message_ids) == ["old-1", "old-2"]
    stored = await all_messages(memory.stub, scope, conversation)
    assert [m.message_id for m in stored] == ["old-1", "old-2"]
    assert stored[0].created_at.ToDatetime(tzinfo=UTC) == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert stored[1].feedback == pb.FEEDBACK_UP and stored[1].model == "gpt-4"

    # A clash in the middle of a batch writes nothing from that batch.
    clash = pb.AppendMessagesRequest(
        **scope,
        conversation_id=conversation,
        messages=[
            pb.NewMessage(role=pb.ROLE_USER, content="new", message_id="new-1"),
            pb.NewMessage(role=pb.ROLE_USER, content="different", message_id="old-1"),
        ],
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.AppendMessages(clash)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert len(await all_messages(memory.stub, scope, conversation)) == 2

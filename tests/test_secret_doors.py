"""No secret is stored through any door: every RPC that takes text, through a real server and
PostgreSQL. Messages, conversation names and comments are stored redacted (verbatim with
`redact_secrets` off); fact texts holding a secret are refused with INVALID_ARGUMENT naming the
field, nothing written, whatever the setting; a request to repeat a secret is never a fact."""

from __future__ import annotations

import uuid

import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.ports import ExtractionInput

from conftest import RunningServer, ServerFactory, all_messages, new_id

AWS_KEY = "AKIA" + "Z7XQ4LMN2PRT6WVB"
GITHUB_TOKEN = "ghp_" + "x7Kd9QmZ2LpR4tWv8NbC1YhJ6sFg3eUa5oPi"
VPN_PASSWORD = "hunter2Xy!"
LOGIN_PASSWORD = "Tr0ub4dor&3"
CARD_PIN = "4821"
SECRETS = (AWS_KEY, GITHUB_TOKEN, VPN_PASSWORD, LOGIN_PASSWORD, CARD_PIN)
REPEAT_REQUESTS = (
    "Please repeat my key back to me.",
    "what's my password again?",
    "remind me of my API key",
    "Read my API key back to me please.",
    "Reveal my secret key.",
)


def test_a_request_to_repeat_a_secret_is_never_a_fact() -> None:
    extractor = RuleExtractor()
    for text in REPEAT_REQUESTS:
        assert extractor.extract_sync(ExtractionInput(text, "")) == [], text
    # The rest of the message is still read.
    [fact] = extractor.extract_sync(
        ExtractionInput("I prefer concise answers. Please repeat my key back to me.", "")
    )
    assert fact.text == "Prefers concise answers"


def _scope() -> dict[str, str]:
    # A graph of its own, so that ListFeedback (per graph, across users) sees only this test.
    return {"username": f"user-{uuid.uuid4().hex[:12]}", "graphname": f"G{uuid.uuid4().hex[:8]}"}


async def _invalid(call: object, field: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details() or ""
    assert details.startswith(f"{field}: holds a secret ("), details
    return details


async def _every_door(memory: RunningServer, scope: dict[str, str]) -> tuple[str, str, str]:
    """Sends a secret through each RPC that takes text; the (turn, imported, fact) ids."""
    stub = memory.stub
    turn, imported = new_id(), new_id()
    started = await stub.StartTurn(
        pb.StartTurnRequest(
            **scope,
            conversation_id=turn,
            content=f"I log into the VPN with {VPN_PASSWORD} as my password. I prefer tables.",
            conversation_name=f"keys {AWS_KEY}",
        )
    )
    await stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=turn,
            content=f"Noted. Your token {GITHUB_TOKEN} stays with you.",
            parent_id=started.message.message_id,
        )
    )
    await stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=turn, content=REPEAT_REQUESTS[0])
    )
    await stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=imported,
            conversation_name=f"pw {LOGIN_PASSWORD} is my password",
            messages=[
                pb.NewMessage(
                    role=pb.ROLE_USER,
                    content=f"my login password? it's {LOGIN_PASSWORD}",
                    comment=f"the PIN for my card is {CARD_PIN}",
                )
            ],
        )
    )
    await stub.GetContext(
        pb.GetContextRequest(**scope, conversation_id=turn, question=f"is {GITHUB_TOKEN} my token?")
    )
    await stub.SubmitFeedback(
        pb.SubmitFeedbackRequest(
            **scope,
            message_id=started.message.message_id,
            feedback=pb.FEEDBACK_DOWN,
            comment=f"you leaked {GITHUB_TOKEN}",
        )
    )
    await stub.RenameConversation(
        pb.RenameConversationRequest(
            **scope, conversation_id=turn, name=f"vpn password {VPN_PASSWORD}"
        )
    )
    fact = (await stub.AddFact(pb.AddFactRequest(**scope, text="Works at Acme"))).fact
    details = await _invalid(
        stub.AddFact(pb.AddFactRequest(**scope, text=f"AWS key is {AWS_KEY}")), "text"
    )
    assert details == "text: holds a secret (aws key)"
    await _invalid(
        stub.AddFacts(
            pb.AddFactsRequest(
                **scope,
                facts=[
                    pb.NewFact(text="Lives in Lisbon"),
                    pb.NewFact(text="Has a cat"),
                    pb.NewFact(text=f"Uses the token {GITHUB_TOKEN}"),
                ],
            )
        ),
        "facts[2].text",
    )
    await _invalid(
        stub.UpdateFact(
            pb.UpdateFactRequest(
                **scope, fact_id=fact.fact_id, text=f"Logs in with {VPN_PASSWORD} as password"
            )
        ),
        "text",
    )
    return turn, imported, fact.fact_id


async def _everything_shown(
    memory: RunningServer, scope: dict[str, str], conversations: tuple[str, str]
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(messages and comments, conversation names, contexts, fact texts) as the RPCs show them."""
    stub = memory.stub
    messages: list[str] = []
    contexts: list[str] = []
    for conversation in conversations:
        for m in await all_messages(stub, scope, conversation):
            messages += [m.content, m.comment]
        context = (
            await stub.GetContext(
                pb.GetContextRequest(**scope, conversation_id=conversation, question="my keys?")
            )
        ).context
        contexts += [
            context.rendered,
            context.summary,
            *(m.content for m in context.recent_messages),
        ]
    feedback = await stub.ListFeedback(pb.ListFeedbackRequest(graphname=scope["graphname"]))
    messages += [part for e in feedback.entries for part in (e.message.content, e.message.comment)]
    names = [
        c.name
        for c in (await stub.ListConversations(pb.ListConversationsRequest(**scope))).conversations
    ]
    facts = [f.text for f in (await stub.ListFacts(pb.ListFactsRequest(**scope))).facts]
    for query in ("password", "key token", "Acme"):
        found = await stub.SearchFacts(pb.SearchFactsRequest(**scope, query=query, threshold=0.0))
        facts += [s.fact.text for s in found.results]
    return messages, names, contexts, facts


async def test_no_secret_is_stored_through_any_door(start_server: ServerFactory) -> None:
    memory = await start_server(fact_extract_async=False)
    scope = _scope()
    turn, imported, _ = await _every_door(memory, scope)
    messages, names, contexts, facts = await _everything_shown(memory, scope, (turn, imported))
    for secret in SECRETS:
        for text in [*messages, *names, *contexts, *facts]:
            assert secret not in text
    assert sorted(names) == [
        "pw [redacted: password] is my password",
        "vpn password [redacted: password]",
    ]
    assert "you leaked [redacted: token]" in messages
    assert "the PIN for my card is [redacted: password]" in messages
    assert "I log into the VPN with [redacted: password] as my password. I prefer tables." in (
        messages
    )
    # Nothing of the refused AddFacts was written; the refused update left the fact as it was.
    live = (await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts
    assert sorted(f.text for f in live) == ["Prefers tables", "Works at Acme"]
    assert not any("repeat" in f.lower() or "key" in f.lower() for f in facts)


async def test_verbatim_setting_keeps_names_and_comments_but_refuses_secret_facts(
    start_server: ServerFactory,
) -> None:
    memory = await start_server(redact_secrets=False, fact_extract_async=False)
    scope = _scope()
    turn, imported, _ = await _every_door(memory, scope)
    messages, names, _, facts = await _everything_shown(memory, scope, (turn, imported))
    assert sorted(names) == [f"pw {LOGIN_PASSWORD} is my password", f"vpn password {VPN_PASSWORD}"]
    assert f"you leaked {GITHUB_TOKEN}" in messages
    assert f"the PIN for my card is {CARD_PIN}" in messages
    # Facts stay secret-free either way: extraction drops secret sentences, AddFact refuses.
    for secret in SECRETS:
        assert all(secret not in text for text in facts)
    live = (await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts
    assert sorted(f.text for f in live) == ["Prefers tables", "Works at Acme"]

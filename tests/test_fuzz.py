"""Property-based fuzzing of every MemoryService RPC against a real server process on the
embedded defaults.

Requests come from the proto descriptors (tests/proto_strategies.py): valid, boundary and
hostile values for every field, drawn toward the scopes, conversations, messages, facts and
page tokens that exist on the server (those of other scopes too), plus raw bytes that do not
decode. Whatever the request, the server must answer a status a client can act on (never
INTERNAL or UNKNOWN), keep SERVING, and a failed write (or any read) must leave the database as
it was: the rows' versions (xmin) of every table the RPCs write are compared before and after.

Size: MEMORY_FUZZ_EXAMPLES examples per RPC (default 120, about 2,800 requests in all; the
raw-bytes tests a third of that). The long run, `scripts/dev.sh fuzz [EXAMPLES] [SEED]`, sets
it and the seed; MEMORY_FUZZ_REPORT names a JSON file for the counts by status and method.

The server runs with fact_extract_async off, so learning and compaction finish inside
CompleteTurn and nothing writes the database between two calls but the calls themselves."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

from conftest import server_process_dir
from proto_strategies import messages, page_tokens, raw_payloads, weighted, with_wire_garbage
from server_process import ServerProcess, database_dsn

pytestmark = pytest.mark.slow

SERVICE = pb.DESCRIPTOR.services_by_name["MemoryService"]
EXAMPLES = int(os.environ.get("MEMORY_FUZZ_EXAMPLES", "120"))
WRITES = {
    "StartTurn",
    "CompleteTurn",
    "AppendMessages",
    "SubmitFeedback",
    "RenameConversation",
    "DeleteConversation",
    "AddFact",
    "AddFacts",
    "UpdateFact",
    "DeleteFact",
    "ForgetScope",
}
# Destructive RPCs last, so the others still find the seeded data.
_LAST = ["DeleteFact", "DeleteConversation", "ForgetScope"]
METHODS = [m.name for m in SERVICE.methods if m.name not in _LAST] + _LAST
# What a client can act on. UNAVAILABLE or DEADLINE_EXCEEDED would mean the database or the
# server struggled with a single request at a time: a finding too.
ACCEPTABLE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
CALL_TIMEOUT_S = 30.0

# Each table the RPCs write, as (key, xmin) pairs: a committed insert, update or delete of any
# row changes it; a rolled-back one does not. `facts` is compared by its content columns: a
# StartTurn's recall bumps last_seen_at and recall_count (GetContext's does not), by design.
_DIGEST = """
SELECT md5(concat_ws('|',
    (SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM scopes),
    (SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM conversations),
    (SELECT string_agg(seq || ':' || xmin, ',' ORDER BY seq) FROM messages),
    (SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM conversation_summaries),
    (SELECT string_agg(id || ':' || kind || ':' || created_at, ',' ORDER BY id) FROM facts),
    (SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM fact_versions),
    (SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM fact_history)))
"""

_TEXTS = [
    "I moved to Lisbon in May 2023 and I work at Acme as a data engineer.",
    "My daughter Maya plays the violin.",
    "What do you remember about my job?",
    "I prefer window seats and vegetarian food.",
    "Show me the accounts with overdue invoices.",
    "My API key is sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c, keep it.",
]


def _timestamp(value: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value.replace(tzinfo=UTC))
    return stamp


@dataclass
class SeededScope:
    """What exists in one scope before the fuzzing starts."""

    username: str
    graphname: str
    conversation_ids: list[str] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    fact_ids: list[str] = field(default_factory=list)
    page_tokens: list[str] = field(default_factory=list)


@dataclass
class Seeded:
    scopes: list[SeededScope] = field(default_factory=list)

    def _all(self, name: str) -> list[str]:
        return [value for scope in self.scopes for value in getattr(scope, name)]

    def requests(self, descriptor: Any) -> st.SearchStrategy[Any]:
        """Requests in one of the seeded scopes (or a scope with nothing in it), whose ids are
        mostly that scope's, sometimes another scope's, sometimes new."""
        nobody = SeededScope("fuzz-nobody", "Finance")
        per_scope = [messages(descriptor, self.meaningful(s)) for s in [*self.scopes, nobody]]
        return st.sampled_from(per_scope).flatmap(lambda strategy: strategy)

    def meaningful(self, scope: SeededScope) -> dict[str, st.SearchStrategy[Any]]:
        def ids(name: str, fresh: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
            own = getattr(scope, name)
            choices = [(1, st.sampled_from(self._all(name))), (1, fresh)]
            return weighted(*choices, *([(4, st.sampled_from(own))] if own else []))

        uuids = st.uuids().map(str)
        message_ids = ids("message_ids", uuids)
        texts = weighted((3, st.sampled_from(_TEXTS)), (1, st.text(min_size=1, max_size=80)))
        new_message = st.builds(
            pb.NewMessage,
            role=st.sampled_from([pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_SYSTEM]),
            content=texts,
            message_id=weighted((2, st.just("")), (2, uuids), (1, message_ids)),
            parent_id=weighted((3, st.just("")), (1, message_ids)),
            feedback=st.sampled_from([0, 1, 2]),
            created_at=weighted(
                (2, st.just(Timestamp())),
                (1, st.datetimes(min_value=datetime(2000, 1, 1)).map(_timestamp)),
            ),
        )
        return {
            "messages": st.lists(new_message, min_size=1, max_size=4),
            "username": weighted(
                (6, st.just(scope.username)), (1, st.sampled_from(self._all_usernames()))
            ),
            "graphname": weighted(
                (6, st.just(scope.graphname)), (1, st.sampled_from(["Finance", "Other"]))
            ),
            "conversation_id": ids("conversation_ids", uuids.map(lambda u: f"fuzz-{u[:8]}")),
            "message_id": message_ids,
            "parent_id": message_ids,
            "fact_id": ids("fact_ids", uuids),
            "page_token": page_tokens(scope.page_tokens or self._all("page_tokens")),
            "content": texts,
            "question": texts,
            "query": texts,
            "text": texts,
            "kind": st.sampled_from(["", "preference", "Decision", "GOAL", "identity", "other"]),
            "role": st.sampled_from([pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_SYSTEM]),
            "feedback": st.sampled_from([0, 1, 2]),
            "created_at": st.datetimes(min_value=datetime(2000, 1, 1)).map(_timestamp),
            "as_of_valid_time": st.datetimes(min_value=datetime(2020, 1, 1)).map(_timestamp),
            "as_of_transaction_time": st.datetimes(min_value=datetime(2020, 1, 1)).map(_timestamp),
            "model": st.sampled_from(["", "gpt-4o", "llama-3"]),
            "comment": st.sampled_from(["", "helpful", "wrong account"]),
            "name": st.sampled_from(["Q3 invoices", "Trip planning"]),
            "conversation_name": st.sampled_from(["", "Q3 invoices"]),
            "page_size": st.integers(0, 20),
            "top_k": st.integers(0, 20),
            "threshold": st.floats(0.0, 1.0),
            "response_time_seconds": st.floats(0.0, 100.0),
        }

    def _all_usernames(self) -> list[str]:
        return sorted({s.username for s in self.scopes} | {"fuzz-nobody"})


@dataclass
class Target:
    server: ServerProcess
    channel: grpc.Channel
    loop: asyncio.AbstractEventLoop
    db: asyncpg.Connection
    seeded: Seeded
    counts: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    calls: int = 0

    def digest(self) -> str:
        future = asyncio.run_coroutine_threadsafe(self.db.fetchval(_DIGEST), self.loop)
        return str(future.result(timeout=30))

    def call(self, method: str, payload: bytes) -> tuple[grpc.StatusCode, str, bytes]:
        self.calls += 1
        path = f"/{SERVICE.full_name}/{method}" if "/" not in method else method
        try:
            response = self.channel.unary_unary(path)(
                payload,
                timeout=CALL_TIMEOUT_S,
                metadata=(("x-request-id", f"fuzz-{self.calls}"),),
            )
        except grpc.RpcError as err:
            code, details = err.code(), err.details() or ""  # type: ignore[attr-defined]
            self.counts[(method.rsplit("/", 1)[-1], code.name)] += 1
            return code, details, b""
        self.counts[(method.rsplit("/", 1)[-1], "OK")] += 1
        return grpc.StatusCode.OK, "", response


async def _seed(channel: grpc.aio.Channel) -> Seeded:
    stub = pb_grpc.MemoryServiceStub(channel)
    seeded = Seeded()
    for username, graphname in [("fuzz-alice", "Finance"), ("fuzz-bob", "Finance"),
                                ("fuzz-alice", "Other")]:  # fmt: skip
        found = SeededScope(username, graphname)
        seeded.scopes.append(found)
        scope = {"username": username, "graphname": graphname}
        for c in range(2):
            conversation_id = f"seed-{username}-{graphname}-{c}"
            found.conversation_ids.append(conversation_id)
            for turn in range(2):
                started = await stub.StartTurn(
                    pb.StartTurnRequest(
                        **scope, conversation_id=conversation_id, content=_TEXTS[turn + c]
                    )
                )
                done = await stub.CompleteTurn(
                    pb.CompleteTurnRequest(
                        **scope,
                        conversation_id=conversation_id,
                        content="Noted.",
                        parent_id=started.message.message_id,
                    )
                )
                found.message_ids += [started.message.message_id, done.message.message_id]
            page = await stub.GetConversation(
                pb.GetConversationRequest(**scope, conversation_id=conversation_id, page_size=1)
            )
            found.page_tokens.append(page.next_page_token)
        for text in ("Prefers tea over coffee.", "Has a dog named Rex."):
            added = await stub.AddFact(pb.AddFactRequest(**scope, text=text))
            found.fact_ids.append(added.fact.fact_id)
        conversations = await stub.ListConversations(
            pb.ListConversationsRequest(**scope, page_size=1)
        )
        facts = await stub.ListFacts(pb.ListFactsRequest(**scope, page_size=1))
        found.page_tokens += [conversations.next_page_token, facts.next_page_token]
        found.page_tokens = [t for t in found.page_tokens if t]
    return seeded


@pytest.fixture(scope="module")
async def target() -> AsyncIterator[Target]:
    with server_process_dir() as data_dir:
        server = ServerProcess(
            "--data-dir",
            str(data_dir),
            "--listen-address",
            "127.0.0.1:0",
            "--fact-extract-async",
            "false",
        )
        await server.start(timeout_s=120)
        db: asyncpg.Connection | None = None
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        try:
            async with server.channel() as seed_channel:
                seeded = await _seed(seed_channel)
            db = await asyncpg.connect(database_dsn(data_dir / "pgdata"))
            found = Target(server, channel, asyncio.get_running_loop(), db, seeded)
            yield found
            _report(found)
        finally:
            channel.close()
            if db is not None:
                await db.close()
            code = await server.stop()
        log = "".join(server.log)
        assert code == 0, log[-5000:]
        # Every answer was a status the servicer chose: nothing escaped as a traceback.
        first_error = min((log.find(m) for m in (" ERROR ", "Traceback") if m in log), default=-1)
        assert first_error < 0, log[first_error : first_error + 5000]


def _report(target: Target) -> None:
    by_code: collections.Counter[str] = collections.Counter()
    for (_, code), n in target.counts.items():
        by_code[code] += n
    report = {
        "requests": sum(by_code.values()),
        "by_code": dict(by_code.most_common()),
        "by_method": {
            method: {c: n for (m, c), n in sorted(target.counts.items()) if m == method}
            for method in sorted({m for m, _ in target.counts})
        },
    }
    print("\nfuzz:", json.dumps(report["by_code"]), f"({report['requests']} requests)")
    if path := os.environ.get("MEMORY_FUZZ_REPORT"):
        Path(path).write_text(json.dumps(report, indent=2) + "\n")


_SETTINGS = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


def _request_class(method: str) -> Any:
    return message_factory.GetMessageClass(SERVICE.methods_by_name[method].input_type)


def _response_class(method: str) -> Any:
    return message_factory.GetMessageClass(SERVICE.methods_by_name[method].output_type)


def _check(
    target: Target, method: str, payload: bytes, shown: Callable[[], str]
) -> grpc.StatusCode:
    before = target.digest()
    code, details, response = target.call(method, payload)
    assert code in ACCEPTABLE, f"{method} answered {code.name} {details!r} to {shown()}"
    if code is grpc.StatusCode.OK:
        _response_class(method).FromString(response)
    else:
        assert details, f"{method} answered {code.name} without a message to {shown()}"
    if code is not grpc.StatusCode.OK or method not in WRITES:
        assert target.digest() == before, f"{method} {code.name} changed the database: {shown()}"
    return code


@pytest.mark.parametrize("method", METHODS)
async def test_generated_requests(target: Target, method: str) -> None:
    descriptor = SERVICE.methods_by_name[method].input_type
    requests = target.seeded.requests(descriptor)
    garbage = weighted((9, st.just(b"")), (1, with_wire_garbage(descriptor)))
    seen: collections.Counter[str] = collections.Counter()

    @settings(_SETTINGS, max_examples=EXAMPLES)
    @given(request=requests, suffix=garbage)
    def fuzz(request: Any, suffix: bytes) -> None:
        payload = request.SerializeToString() + suffix
        code = _check(target, method, payload, lambda: f"{request!r:.2000} + {suffix!r}")
        seen[code.name] += 1

    await asyncio.to_thread(fuzz)
    # The generator reaches past validation: some requests succeed, some are refused.
    assert seen["INVALID_ARGUMENT"] > 0, seen
    assert sum(n for c, n in seen.items() if c != "INVALID_ARGUMENT") > 0, seen


@pytest.mark.parametrize("method", [*METHODS, "/grpc.health.v1.Health/Check"])
async def test_undecodable_bytes(target: Target, method: str) -> None:
    if method.startswith("/"):
        request_class: Any = health_pb2.HealthCheckRequest
        valid = st.just(request_class().SerializeToString())
    else:
        request_class = _request_class(method)
        descriptor = SERVICE.methods_by_name[method].input_type
        valid = target.seeded.requests(descriptor).map(lambda m: m.SerializeToString())

    @settings(_SETTINGS, max_examples=max(10, EXAMPLES // 3))
    @given(payload=raw_payloads(valid))
    def fuzz(payload: bytes) -> None:
        try:
            request_class.FromString(payload)
            decodes = True
        except Exception:
            decodes = False
        before = target.digest()
        code, details, _ = target.call(method, payload)
        assert code in ACCEPTABLE, (method, code, details)
        if not decodes:
            assert code is grpc.StatusCode.INVALID_ARGUMENT, (method, payload, code, details)
            assert "request is not a valid" in details, details
            assert target.digest() == before

    await asyncio.to_thread(fuzz)


async def test_still_serving_after_the_fuzz(target: Target) -> None:
    async with target.server.channel() as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = pb_grpc.MemoryServiceStub(channel)
        scope = {"username": f"after-{uuid.uuid4().hex[:8]}", "graphname": "Finance"}
        turn = await stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id="c", content="still here?")
        )
        assert turn.conversation_created
    assert target.server.process is not None and target.server.process.poll() is None

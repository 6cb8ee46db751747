"""Metrics endpoint, structured logs with request id and scope hash, and tracing, against a real
server: the scrape is a real HTTP request to the server's metrics port."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from memory_client.v1 import memory_pb2 as pb
from memory_server.logs import ContextFilter, JsonFormatter
from memory_server.memory.identity import Scope

from conftest import RunningServer, ServerFactory, assert_eventually, new_id

FAMILIES = {
    "graphrag_memory_rpc_requests",
    "graphrag_memory_rpc_duration_seconds",
    "graphrag_memory_actors_alive",
    "graphrag_memory_mailbox_depth",
    "graphrag_memory_outbox_pending",
    "graphrag_memory_outbox_lag_seconds",
    "graphrag_memory_embedding_batch_size",
    "graphrag_memory_embedding_batch_duration_seconds",
    "graphrag_memory_fact_decisions",
    "graphrag_memory_secrets_dropped",
    "graphrag_memory_learning_pending",
    "graphrag_memory_learning_duration_seconds",
    "graphrag_memory_live_vectors_missing",
    "graphrag_memory_vector_index_pending",
    "graphrag_memory_vector_index_lag_seconds",
}


async def _scrape(server: RunningServer) -> dict[str, Any]:
    url = f"http://127.0.0.1:{server.server.metrics_port}/metrics"
    async with httpx.AsyncClient() as http:
        reply = await http.get(url)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    samples: dict[str, Any] = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            key = (
                sample.name + json.dumps(sample.labels, sort_keys=True)
                if sample.labels
                else sample.name
            )
            samples[key] = sample.value
        samples.setdefault("__families__", set()).add(family.name)
    return samples


def _value(samples: dict[str, Any], name: str, **labels: str) -> float:
    key = name + json.dumps(labels, sort_keys=True) if labels else name
    return float(samples.get(key, 0.0))


async def test_metrics_endpoint_shows_every_family_after_a_short_run(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    server = await start_server(metrics_address="127.0.0.1:0", fact_extract_async=False)
    stub = server.stub
    conversation_id = new_id()
    for text in (
        "I prefer dark mode.",
        "My API key is sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e.",
    ):
        started = await stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation_id, content=text)
        )
        await stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation_id,
                content="Noted.",
                parent_id=started.message.message_id,
            )
        )
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.GetConversation(pb.GetConversationRequest(**scope, conversation_id="nope"))

    async def indexed() -> bool:
        return _value(await _scrape(server), "graphrag_memory_outbox_pending") == 0

    # The gauge counts the whole database's outbox, which earlier tests may have left rows in.
    await assert_eventually(indexed, timeout_s=60, what="the outbox drained")
    samples = await _scrape(server)
    assert samples["__families__"] >= FAMILIES
    ok = {"method": "StartTurn", "code": "OK"}
    assert _value(samples, "graphrag_memory_rpc_requests_total", **ok) == 2
    assert (
        _value(samples, "graphrag_memory_rpc_requests_total", method="CompleteTurn", code="OK") == 2
    )
    not_found = {"method": "GetConversation", "code": "NOT_FOUND"}
    assert _value(samples, "graphrag_memory_rpc_requests_total", **not_found) == 1
    assert _value(samples, "graphrag_memory_rpc_duration_seconds_count", **ok) == 2
    assert _value(samples, "graphrag_memory_rpc_duration_seconds_bucket", **ok, le="+Inf") == 2
    assert _value(samples, "graphrag_memory_actors_alive") >= 1
    assert _value(samples, "graphrag_memory_mailbox_depth") == 0
    assert _value(samples, "graphrag_memory_outbox_lag_seconds") == 0
    assert _value(samples, "graphrag_memory_embedding_batch_size_count") >= 1
    assert _value(samples, "graphrag_memory_embedding_batch_duration_seconds_count") >= 1
    assert _value(samples, "graphrag_memory_fact_decisions_total", decision="ADD") == 1
    assert _value(samples, "graphrag_memory_secrets_dropped_total") == 1

    async with httpx.AsyncClient() as http:
        health = await http.get(f"http://127.0.0.1:{server.server.metrics_port}/healthz")
    assert (health.status_code, health.text) == (200, "SERVING\n")


async def test_learning_metrics_say_when_background_learning_is_done(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    server = await start_server(metrics_address="127.0.0.1:0", fact_extract_async=True)
    conversation_id = new_id()
    for text in ("I prefer dark mode.", "What time is it?", "I live in Lisbon."):
        started = await server.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation_id, content=text)
        )
        await server.stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation_id,
                content="Noted.",
                parent_id=started.message.message_id,
            )
        )

    async def learned() -> bool:
        samples = await _scrape(server)
        return _value(samples, "graphrag_memory_learning_pending") == 0

    await assert_eventually(learned, what="no turn still learning")
    samples = await _scrape(server)
    # Every reply's learning is counted, the one that found nothing too; once none is pending,
    # its facts are there.
    assert _value(samples, "graphrag_memory_learning_duration_seconds_count") == 3
    assert _value(samples, "graphrag_memory_learning_duration_seconds_sum") > 0
    facts = (await server.stub.ListFacts(pb.ListFactsRequest(**scope))).facts
    assert sorted(f.text for f in facts) == ["Lives in Lisbon", "Prefers dark mode"]


async def test_request_id_is_echoed_to_the_caller(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    call = memory.stub.GetConversation(
        pb.GetConversationRequest(**scope, conversation_id="unknown-conversation"),
        metadata=(("x-request-id", "req-42"),),
    )
    with pytest.raises(grpc.aio.AioRpcError):
        await call
    assert ("x-request-id", "req-42") in tuple(await call.trailing_metadata())

    ok = memory.stub.ListConversations(pb.ListConversationsRequest(**scope))
    await ok
    generated = dict(await ok.trailing_metadata())["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{12}-[0-9a-f]+", generated)


async def test_logs_carry_request_id_and_scope_hash_never_the_text(
    start_server: ServerFactory, scope: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(fact_extract_async=False)
    caplog.handler.addFilter(ContextFilter())
    caplog.set_level(logging.INFO)
    secret = "hunter2-Zq9!xW"
    conversation_id = new_id()
    started = await server.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=conversation_id, content=f"My password is {secret}."
        )
    )
    await server.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation_id,
            content="I will not store that.",
            parent_id=started.message.message_id,
        ),
        metadata=(("x-request-id", "req-7"),),
    )
    [redacted, dropped] = [r for r in caplog.records if "secret" in r.getMessage()]
    assert json.loads(JsonFormatter().format(redacted))["rpc_method"].endswith("/StartTurn")
    assert redacted.getMessage() == "redacted 1 secret(s) before storing a message"
    entry = json.loads(JsonFormatter().format(dropped))
    assert entry["request_id"] == "req-7"
    assert entry["scope_hash"] == Scope(scope["username"], scope["graphname"]).scope_hash
    assert entry["rpc_method"] == "/graphrag.memory.v1.MemoryService/CompleteTurn"
    assert entry["level"] == "INFO" and entry["logger"] == "memory_server.memory.learning.reading"
    assert secret not in caplog.text and "password" not in caplog.text


async def test_tracing_makes_one_server_span_per_rpc(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # once per process; later calls are ignored
    server = await start_server(tracing=True)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    await server.stub.ListConversations(
        pb.ListConversationsRequest(**scope), metadata=(("traceparent", parent),)
    )
    with pytest.raises(grpc.aio.AioRpcError):
        await server.stub.GetConversation(pb.GetConversationRequest(**scope, conversation_id="x"))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    listed = spans["graphrag.memory.v1.MemoryService/ListConversations"]
    assert listed.kind is trace.SpanKind.SERVER
    assert listed.attributes is not None
    assert listed.attributes["rpc.method"] == "ListConversations"
    assert listed.attributes["rpc.grpc.status_code"] == 0
    assert format(listed.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    failed = spans["graphrag.memory.v1.MemoryService/GetConversation"]
    assert failed.attributes is not None
    assert failed.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert not failed.status.is_ok

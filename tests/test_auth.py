"""Authentication and transport security against real servers: bearer tokens (rotation, health
open for probes, reflection guarded or switched off), TLS and mutual TLS with certificates made
by openssl for the test."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from memory_client import AsyncMemoryClient, MemoryClientError
from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

from conftest import ServerFactory

TOKEN = "s3cret-token-0123456789"
NEXT_TOKEN = "rotated-token-9876543210"


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def _list_services(
    channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]
) -> list[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    names: list[str] = []
    async for reply in stub.ServerReflectionInfo(iter([request]), metadata=metadata):
        names.extend(s.name for s in reply.list_services_response.service)
    return names


async def test_bearer_token_is_required_except_for_health(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    server = await start_server(auth_token=f"{TOKEN}, {NEXT_TOKEN}")
    request = pb.ListConversationsRequest(**scope)
    for metadata in ((), _bearer("wrong"), (("authorization", f"Basic {TOKEN}"),)):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await server.stub.ListConversations(request, metadata=metadata)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "Bearer" in (refused.value.details() or "")
    # Both configured tokens work, so one can be rotated without downtime.
    for token in (TOKEN, NEXT_TOKEN):
        await server.stub.ListConversations(request, metadata=_bearer(token))
    # Probes carry no token.
    reply = await server.health.Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    # Reflection tells what the service is: it needs the token too.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _list_services(server.channel, ())
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "graphrag.memory.v1.MemoryService" in await _list_services(
        server.channel, _bearer(TOKEN)
    )
    # The typed client sends it for every call.
    async with AsyncMemoryClient(server.address, token=TOKEN) as client:
        assert list((await client.list_conversations(**scope)).conversations) == []
    async with AsyncMemoryClient(server.address, token="wrong", retries=0) as client:
        with pytest.raises(MemoryClientError) as failed:
            await client.list_conversations(**scope)
        assert failed.value.code is grpc.StatusCode.UNAUTHENTICATED


async def test_a_refused_call_writes_nothing(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    server = await start_server(auth_token=TOKEN)
    with pytest.raises(grpc.aio.AioRpcError):
        await server.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id="c1", content="hello")
        )
    listed = await server.stub.ListConversations(
        pb.ListConversationsRequest(**scope), metadata=_bearer(TOKEN)
    )
    assert list(listed.conversations) == []


async def test_reflection_can_be_switched_off(start_server: ServerFactory) -> None:
    server = await start_server(reflection=False)
    # The call is opened without sending a request: the server answers UNIMPLEMENTED to the
    # method itself. (Sending one raced that answer: now and then the client's own send
    # failed first, and the call read INTERNAL "Internal error from Core".)
    call = reflection_pb2_grpc.ServerReflectionStub(server.channel).ServerReflectionInfo()
    # With reflection on, the call would wait for a request and this would time out.
    assert await asyncio.wait_for(call.code(), 10) is grpc.StatusCode.UNIMPLEMENTED


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    d = tmp_path_factory.mktemp("pki")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, ext in (("server", ["-extfile", "server.ext"]), ("client", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", f"/CN={name}")  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", *ext)  # fmt: skip
    yield d


async def test_tls_serves_only_tls_clients(
    start_server: ServerFactory, pki: Path, scope: dict[str, str]
) -> None:
    server = await start_server(
        tls_cert_file=str(pki / "server.pem"), tls_key_file=str(pki / "server.key")
    )
    roots = (pki / "ca.pem").read_bytes()
    async with AsyncMemoryClient(server.address, tls=True, root_certificates=roots) as client:
        assert await client.health()
        await client.list_conversations(**scope)
    async with AsyncMemoryClient(server.address, retries=0, timeout_s=2) as plaintext:
        with pytest.raises(MemoryClientError) as failed:
            await plaintext.list_conversations(**scope)
        assert failed.value.code is grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_requires_a_client_certificate(
    start_server: ServerFactory, pki: Path, scope: dict[str, str]
) -> None:
    server = await start_server(
        tls_cert_file=str(pki / "server.pem"),
        tls_key_file=str(pki / "server.key"),
        tls_client_ca_file=str(pki / "ca.pem"),
    )
    roots = (pki / "ca.pem").read_bytes()
    with_cert = grpc.ssl_channel_credentials(
        root_certificates=roots,
        private_key=(pki / "client.key").read_bytes(),
        certificate_chain=(pki / "client.pem").read_bytes(),
    )
    async with grpc.aio.secure_channel(server.address, with_cert) as channel:
        await pb_grpc.MemoryServiceStub(channel).ListConversations(
            pb.ListConversationsRequest(**scope), timeout=5
        )
    without_cert = grpc.ssl_channel_credentials(root_certificates=roots)
    async with grpc.aio.secure_channel(server.address, without_cert) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


def _healthcheck(environ: dict[str, str]) -> int:
    # The server's settings as its container's environment would hold them.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRAG_MEMORY_")}
    result = subprocess.run(
        [sys.executable, "-m", "memory_server.healthcheck"],
        env={**env, **environ},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.returncode


async def test_container_healthcheck_follows_the_server_settings(
    start_server: ServerFactory, pki: Path
) -> None:
    plaintext = await start_server()
    env = {"GRAPHRAG_MEMORY_LISTEN_ADDRESS": f"0.0.0.0:{plaintext.server.port}"}
    assert await asyncio.to_thread(_healthcheck, env) == 0

    tls = {
        "GRAPHRAG_MEMORY_TLS_CERT_FILE": str(pki / "server.pem"),
        "GRAPHRAG_MEMORY_TLS_KEY_FILE": str(pki / "server.key"),
    }
    secure = await start_server(
        tls_cert_file=tls["GRAPHRAG_MEMORY_TLS_CERT_FILE"],
        tls_key_file=tls["GRAPHRAG_MEMORY_TLS_KEY_FILE"],
        metrics_address="127.0.0.1:0",
    )
    listen = {"GRAPHRAG_MEMORY_LISTEN_ADDRESS": f"0.0.0.0:{secure.server.port}"}
    metrics = {"GRAPHRAG_MEMORY_METRICS_ADDRESS": f"0.0.0.0:{secure.server.metrics_port}"}
    assert await asyncio.to_thread(_healthcheck, {**tls, **listen, **metrics}) == 0
    # Without a metrics port there is nothing it can ask a TLS server over plaintext.
    assert await asyncio.to_thread(_healthcheck, {**tls, **listen}) == 1
    await secure.server.close()  # NOT_SERVING, then gone
    assert await asyncio.to_thread(_healthcheck, {**tls, **listen, **metrics}) == 1

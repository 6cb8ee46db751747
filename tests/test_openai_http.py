"""The shared OpenAI-compatible HTTP client against scripted loopback endpoints: which failures
it retries, how long it waits (Retry-After, back-off), the one budget per call, and the domain
errors it raises."""

from __future__ import annotations

import email.utils
import json
import logging
import socket
import time
from typing import Any

import pytest

from memory_server.memory.errors import Overloaded, Unavailable
from memory_server.openai_http import (
    ChatClient,
    EndpointError,
    OpenAICompatibleClient,
    RetryPolicy,
)
from memory_server.openai_http.retry import retry_after_seconds

from fake_openai import Answer, FakeScripted, serve_scripted

OK = Answer(200, b'{"answer": 42}')
# Error bodies that echo the request, as some servers do: never in an error or the log.
ECHO = json.dumps({"error": {"message": "you said: my secret plans"}}).encode()


def client(fake: FakeScripted, **kwargs: Any) -> OpenAICompatibleClient:
    kwargs.setdefault("timeout_s", 5.0)
    # Short waits keep the tests quick; the jitter still applies.
    kwargs.setdefault("retry", RetryPolicy(max_attempts=3, first_wait_s=0.05, max_wait_s=0.1))
    return OpenAICompatibleClient(fake.base_url, kwargs.pop("api_key", "sk-test"), **kwargs)


async def test_posts_json_with_the_key_and_returns_the_json() -> None:
    with serve_scripted(OK) as fake:
        async with client(fake) as http:
            assert await http.post("/embeddings", {"input": ["a"]}) == {"answer": 42}
    [request] = fake.requests
    assert request["path"] == "/v1/embeddings"
    assert json.loads(request["body"]) == {"input": ["a"]}
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["Content-Type"] == "application/json"


async def test_no_key_no_authorization_header() -> None:
    with serve_scripted(OK) as fake:
        async with client(fake, api_key=None) as http:
            await http.post("x", {})
    assert "Authorization" not in fake.requests[0]["headers"]


@pytest.mark.parametrize("status", [408, 429, 502, 503, 504])
async def test_transient_statuses_are_retried(status: int) -> None:
    with serve_scripted(Answer(status, ECHO), OK) as fake:
        async with client(fake) as http:
            assert await http.post("x", {}) == {"answer": 42}
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, Unavailable),
        (501, Unavailable),
        (400, EndpointError),
        (401, EndpointError),
        (404, EndpointError),
        (409, EndpointError),
        (422, EndpointError),
    ],
)
async def test_other_statuses_fail_at_once(status: int, error: type[Exception]) -> None:
    with serve_scripted(Answer(status, ECHO), OK) as fake:
        async with client(fake) as http:
            with pytest.raises(error, match=f"HTTP {status}") as caught:
                await http.post("x", {})
    assert len(fake.requests) == 1
    assert "secret" not in str(caught.value)


async def test_attempts_are_bounded_and_the_last_error_is_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="memory_server.openai_http")
    with serve_scripted(Answer(503, ECHO)) as fake:
        async with client(fake) as http:
            with pytest.raises(Unavailable, match="answered HTTP 503"):
                await http.post("x", {})
    assert len(fake.requests) == 3
    retries = [r.getMessage() for r in caplog.records if r.name.startswith("memory_server.")]
    assert len(retries) == 2 and "attempt 2 of 3" in retries[0] and "HTTP 503" in retries[0]
    assert "secret" not in caplog.text


async def test_429_is_overloaded_after_its_retries() -> None:
    with serve_scripted(Answer(429, ECHO)) as fake:
        async with client(fake) as http:
            with pytest.raises(Overloaded, match="rate limiting"):
                await http.post("x", {})
    assert len(fake.requests) == 3


async def test_retry_after_seconds_is_honoured() -> None:
    with serve_scripted(Answer(503, headers={"Retry-After": "0.4"}), OK) as fake:
        async with client(fake) as http:
            started = time.monotonic()
            assert await http.post("x", {}) == {"answer": 42}
            assert time.monotonic() - started >= 0.4
    assert len(fake.requests) == 2


async def test_a_retry_after_beyond_the_budget_fails_now() -> None:
    with serve_scripted(Answer(429, headers={"Retry-After": "120"}), OK) as fake:
        async with client(fake, timeout_s=2.0) as http:
            started = time.monotonic()
            with pytest.raises(Overloaded, match="HTTP 429"):
                await http.post("x", {})
            assert time.monotonic() - started < 0.5
    assert len(fake.requests) == 1


def test_retry_after_forms() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 1.5 ") == 1.5
    assert retry_after_seconds("-4") == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("nan") is None
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert retry_after_seconds(date, now=now) == pytest.approx(7.0)
    past = email.utils.formatdate(now - 60, usegmt=True)
    assert retry_after_seconds(past, now=now) == 0.0


async def test_a_dropped_connection_is_retried() -> None:
    with serve_scripted(Answer(drop=True), OK) as fake:
        async with client(fake) as http:
            assert await http.post("x", {}) == {"answer": 42}
    assert len(fake.requests) == 2


async def test_an_endpoint_that_is_not_there_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = OpenAICompatibleClient(f"http://127.0.0.1:{port}/v1", None, 1.0)
    async with http:
        started = time.monotonic()
        with pytest.raises(Unavailable, match=r"is unreachable \(ConnectError\)"):
            await http.post("x", {})
        assert time.monotonic() - started < 1.5


async def test_one_budget_for_the_whole_call() -> None:
    with serve_scripted(Answer(wait=True)) as fake:
        async with client(fake, timeout_s=5.0) as http:
            started = time.monotonic()
            with pytest.raises(Unavailable, match="timed out: it did not answer in 0.3s"):
                await http.post("x", {}, budget_s=0.3)
            assert time.monotonic() - started < 1.0
        fake.release.set()
    assert len(fake.requests) == 1  # the budget is spent: no retry


async def test_the_budget_is_at_most_the_timeout() -> None:
    with serve_scripted(Answer(wait=True)) as fake:
        async with client(fake, timeout_s=0.3) as http:
            with pytest.raises(Unavailable, match="did not answer in 0.3s"):
                await http.post("x", {}, budget_s=60)
        fake.release.set()


async def test_waits_and_attempts_share_the_budget() -> None:
    slow_retries = RetryPolicy(max_attempts=10, first_wait_s=0.2, max_wait_s=0.2)
    with serve_scripted(Answer(503)) as fake:
        async with client(fake, timeout_s=0.5, retry=slow_retries) as http:
            started = time.monotonic()
            with pytest.raises(Unavailable, match="HTTP 503"):  # the real reason, not a timeout
                await http.post("x", {})
            assert time.monotonic() - started < 1.0
    assert 1 <= len(fake.requests) < 10


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (Answer(200, b"<html>not json{{"), "response is not JSON"),
        (Answer(200, b"[" + b"1," * 600_000 + b"1]"), "response too large"),
    ],
)
async def test_unusable_answers_are_endpoint_errors(answer: Answer, reason: str) -> None:
    with serve_scripted(answer) as fake:
        async with client(fake) as http:
            with pytest.raises(EndpointError, match=reason):
                await http.post("x", {})
    assert len(fake.requests) == 1


async def test_close_is_idempotent_and_a_later_call_reopens() -> None:
    with serve_scripted(OK) as fake:
        http = client(fake)
        await http.close()  # before start
        await http.start()
        await http.close()
        await http.close()
        assert await http.post("x", {}) == {"answer": 42}
        await http.close()


async def test_chat_client_returns_the_content() -> None:
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": " Hi "}}]}
    with serve_scripted(Answer(200, json.dumps(completion).encode())) as fake:
        async with ChatClient(fake.base_url, None, 5.0) as chat:
            reply = await chat.complete("m", [{"role": "user", "content": "hello"}], max_tokens=8)
            assert chat.completions_url == fake.base_url + "/chat/completions"
    assert reply == "Hi"
    body = json.loads(fake.requests[0]["body"])
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "temperature": 0.0,
        "max_tokens": 8,
    }


@pytest.mark.parametrize(
    ("completion", "reason"),
    [
        ({"choices": []}, "no choices"),
        ({"choices": [{"message": {"content": "  "}}]}, "empty content"),
        ({"choices": [{"message": {"content": None}}]}, "empty content"),
    ],
)
async def test_chat_client_without_content(completion: dict[str, Any], reason: str) -> None:
    with serve_scripted(Answer(200, json.dumps(completion).encode())) as fake:
        async with ChatClient(fake.base_url, None, 5.0) as chat:
            with pytest.raises(EndpointError, match=reason):
                await chat.complete("m", [{"role": "user", "content": "hi"}], max_tokens=8)


def test_the_policy_checks_its_bounds() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(first_wait_s=2.0, max_wait_s=1.0)
    with pytest.raises(ValueError):
        OpenAICompatibleClient("http://127.0.0.1:9/v1", None, 0)

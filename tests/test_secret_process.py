"""Long texts: the filter scans a long line in bounded pieces (secret_spans.windows) and the
server sends a long text's scan to a worker process (ProcessSecretFilter). Neither may change
what is found: every secret form of the corpus, placed where the pieces are cut, is redacted
exactly as on its own; a worker process that dies costs a scan nothing."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest
from test_secret_corpus import secret_forms

from memory_client.v1 import memory_pb2 as pb
from memory_server.extraction.secret_process import INLINE_CHARS, ProcessSecretFilter
from memory_server.extraction.secret_spans import WINDOW_CHARS, WINDOW_REACH, windows
from memory_server.extraction.secrets import DetectSecretsFilter

from conftest import ServerFactory, all_messages, new_id

FILTER = DetectSecretsFilter()
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
FILLER_WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "on",
    "a",
    "trip",
)


def _filler(chars: int) -> str:
    """Benign words, at least `chars` characters, ending in a blank."""
    out: list[str] = []
    length = 0
    while length < chars:
        out.append(FILLER_WORDS[len(out) % len(FILLER_WORDS)] + " ")
        length += len(out[-1])
    return "".join(out)


def _long_text(chars: int, secret_every: int = 0) -> str:
    return "".join(
        f"{_filler(secret_every)}my key is {AWS_KEY} " if secret_every else _filler(chars)
        for _ in range(max(1, chars // max(secret_every, 1)))
    )


def test_pieces_cover_the_line_cut_at_blanks_and_overlap_by_the_reach() -> None:
    line = _filler(20_000)
    pieces = list(windows(line))
    assert pieces[0][0] == 0 and pieces[-1][1] == len(line)
    for (start, end), (next_start, _) in zip(pieces, pieces[1:], strict=False):
        assert start < next_start < end  # each piece starts inside the one before
        assert end - next_start >= WINDOW_REACH  # ... at least the reach before its end
        assert line[next_start] == " " and line[end] == " "  # cut at blanks only
        assert end - start <= WINDOW_CHARS + WINDOW_REACH + 20  # bounded (plus a word)
    assert list(windows("x" * 10_000)) == [(0, 10_000)]  # no blank: never cut
    assert list(windows("short line")) == [(0, 10)]


@pytest.mark.parametrize("where", ["across the cut", "across the reach"])
def test_every_corpus_secret_is_redacted_the_same_where_the_scan_cuts_the_line(
    where: str,
) -> None:
    base = _filler(WINDOW_CHARS + WINDOW_REACH * 3)
    cut = base.index(" ", WINDOW_CHARS)  # where the first piece's own part ends
    # A sentence starting just before the boundary has the first blank at or after it inside.
    boundary = WINDOW_CHARS if where == "across the cut" else cut + WINDOW_REACH
    differ = []
    for sentence, _secret in secret_forms():
        alone = FILTER.redact(sentence)
        for before in (3, 17, 40):  # the sentence starts this far before the boundary
            prefix = base[: boundary - before - 1] + " "
            suffix = " " + _filler(WINDOW_REACH * 2)
            found = FILTER.redact(prefix + sentence + suffix)
            if found.text != prefix + alone.text + suffix or found.secrets_found != (
                alone.secrets_found
            ):
                differ.append((before, sentence))
    assert differ == []


def test_a_long_text_is_scanned_in_the_worker_process_with_the_same_result() -> None:
    secrets = ProcessSecretFilter()
    try:
        short = f"my key is {AWS_KEY}"
        assert secrets.redact(short) == FILTER.redact(short)
        assert not secrets.worker_started  # short texts never start it
        text = _long_text(INLINE_CHARS * 3, secret_every=5_000)
        assert len(text) > INLINE_CHARS
        redacted, scrubbed = secrets.redact(text), secrets.scrub(text)
        assert secrets.worker_started
        assert redacted == FILTER.redact(text) and scrubbed == FILTER.scrub(text)
        assert redacted.secrets_found == text.count(AWS_KEY) and AWS_KEY not in redacted.text
    finally:
        secrets.close()


def test_a_dead_worker_costs_no_scan_and_is_replaced() -> None:
    secrets = ProcessSecretFilter()
    text = _long_text(INLINE_CHARS * 2, secret_every=4_000)
    try:
        assert AWS_KEY not in secrets.redact(text).text
        workers = multiprocessing.active_children()
        assert workers, "the scan ran in a worker process"
        for worker in workers:
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGKILL)
            worker.join(10)
        assert secrets.redact(text) == FILTER.redact(text)  # in this thread, the worker gone
        assert secrets.redact(text) == FILTER.redact(text)  # in a new worker
        assert secrets.worker_started and multiprocessing.active_children()
    finally:
        secrets.close()
    assert not multiprocessing.active_children()  # close stops it
    assert secrets.redact(text) == FILTER.redact(text)  # and scans go on in the caller
    secrets.close()  # idempotent


async def test_a_long_message_with_a_secret_is_stored_redacted(start_server: ServerFactory) -> None:
    server = await start_server()
    scope = {"username": f"user-{new_id()}", "graphname": "Finance"}
    conversation = new_id()
    content = _long_text(INLINE_CHARS * 2, secret_every=6_000)
    await server.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content=content)
    )
    await server.stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=conversation,
            messages=[pb.NewMessage(role=pb.ROLE_ASSISTANT, content=content)],
        )
    )
    stored = [m.content for m in await all_messages(server.stub, scope, conversation)]
    assert len(stored) == 2
    for text in stored:
        assert AWS_KEY not in text
        assert text.count("[redacted: aws key]") == content.count(AWS_KEY)

"""memoryctl (memory_client.cli) as a person runs it: a real subprocess against a real server
running in this test's event loop (so the subprocess is awaited, never waited on blocking),
with its exact output and exit status asserted."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from memory_client.cli import ExitCode, main
from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.conversation.stm import HEADER_UNIT, RECENT_HEADING_UNIT

from conftest import RunningServer, all_messages, assert_eventually, new_id

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
UUID = r"[0-9a-f-]{36}"


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


async def memoryctl(target: str, *args: str, stdin: str | None = None) -> Result:
    # The caller's MEMORYCTL_* variables must not change what the test sees.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYCTL_")}
    command = [sys.executable, "-m", "memory_client.cli", "--target", target, *args]
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate(None if stdin is None else stdin.encode())
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


Ctl = Callable[..., Awaitable[Result]]


@pytest.fixture
def ctl(memory: RunningServer) -> Ctl:
    """memoryctl aimed at this test's server."""
    return functools.partial(memoryctl, memory.address)


@pytest.fixture
def sc(scope: dict[str, str]) -> list[str]:
    """The test's scope as memoryctl options."""
    return ["-u", scope["username"], "-g", scope["graphname"]]


def field(out: str, key: str) -> str:
    """The value of a `key  value` line of memoryctl's plain output."""
    for line in out.splitlines():
        if line.startswith(key + " "):
            return line[len(key) :].strip()
    raise AssertionError(f"no {key!r} line in {out!r}")


def assert_lines(out: str, patterns: list[str]) -> None:
    lines = out.splitlines()
    assert len(lines) == len(patterns), out
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), f"{line!r} !~ {pattern!r}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_turn_round_trip_then_context_and_conversation_show_both_turns(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    conv = new_id()
    at = [*sc, "-c", conv]
    started = await ctl("start-turn", *at, "--name", "Revenue", "What is our Q3 revenue?")
    assert (started.code, started.err) == (0, "")
    user_id = field(started.out, "message")
    assert field(started.out, "conversation") == f"{conv} (created)"
    assert started.out.endswith("\n\n" + HEADER_UNIT)

    completed = await ctl(
        "complete-turn", *at, "--model", "gpt-4o-mini", "--parent-id", user_id,
        "--response-time", "0.5", "Q3 revenue was 12M.",
    )  # fmt: skip
    assert (completed.code, completed.err) == (0, "")
    assert field(completed.out, "parent") == user_id
    assert field(completed.out, "model") == "gpt-4o-mini"
    reply_id = field(completed.out, "message")

    shown = await ctl("context", *at, "--question", "And Q4?")
    expected = (
        await memory.stub.GetContext(
            pb.GetContextRequest(**scope, conversation_id=conv, question="And Q4?")
        )
    ).context
    assert expected.rendered == (
        HEADER_UNIT + RECENT_HEADING_UNIT + "user: What is our Q3 revenue?\n"
        "assistant: Q3 revenue was 12M.\n"
    )
    assert shown == Result(
        0,
        f"{expected.rendered}\ntokens  {expected.total_tokens} of {expected.budget_tokens} tokens"
        f" (summary 0, recent {expected.recent_tokens}, long-term 0); 2 recent messages,"
        " 0 omitted;"
        " 0 facts and 0 episodes recalled\n",
        "",
    )

    listed = await ctl("conversation", *at)
    assert listed.code == 0
    assert_lines(
        listed.out,
        [
            f"conversation  {conv}",
            "name          Revenue",
            "messages      2",
            f"created       {STAMP}",
            "",
            "TIME {18}ROLE {7}ID {36}FEEDBACK  CONTENT",
            rf"{STAMP}  user {{7}}{user_id}  - {{9}}What is our Q3 revenue\?",
            rf"{STAMP}  assistant  {reply_id}  - {{9}}Q3 revenue was 12M\.",
        ],
    )


async def test_json_output_parses_and_keeps_proto_field_names(ctl: Ctl, sc: list[str]) -> None:
    conv = new_id()
    # --json after the subcommand, as a global option may be.
    started = await ctl("start-turn", *sc, "-c", conv, "Hello there", "--json")
    assert started.code == 0
    body = json.loads(started.out)
    assert body["conversation_created"] is True
    assert body["message"]["role"] == "ROLE_USER"
    assert body["message"]["content"] == "Hello there"
    assert re.fullmatch(UUID, body["message"]["message_id"])
    assert body["context"]["recent_messages"] == []
    assert body["context"]["budget_tokens"] > 0

    health = await ctl("--json", "health")
    assert (health.code, json.loads(health.out)) == (0, {"status": "SERVING"})


async def test_conversations_table_is_newest_first_cut_with_ellipsis_and_all_follows_pages(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    long_name = "A quarterly review of revenue, costs and forecasts"
    ids = [new_id() for _ in range(3)]
    for conv, name in zip(ids, ["First", "Second", long_name], strict=True):
        await memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conv, content="hi", conversation_name=name)
        )
    header = "ID {17}NAME {30}MESSAGES  UPDATED"
    rows = [
        rf"{ids[2]}  {re.escape(long_name[:31])}… {{9}}1  {STAMP}",
        rf"{ids[1]}  Second {{35}}1  {STAMP}",
        rf"{ids[0]}  First {{36}}1  {STAMP}",
    ]
    first_page = await ctl("conversations", *sc, "--page-size", "2")
    assert first_page.code == 0
    assert_lines(first_page.out, [header, *rows[:2], r"more: --page-token \S+  \(or --all\)"])

    every = await ctl("conversations", *sc, "--page-size", "2", "--all")
    assert_lines(every.out, [header, *rows])

    as_json = await ctl("--json", "conversations", *sc, "--page-size", "1", "--all")
    body = json.loads(as_json.out)
    assert [c["conversation_id"] for c in body["conversations"]] == ids[::-1]
    assert [c["message_count"] for c in body["conversations"]] == ["1", "1", "1"]
    assert body["next_page_token"] == ""


async def test_feedback_up_with_comment_is_stored_on_the_reply(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    conv = new_id()
    await memory.stub.StartTurn(pb.StartTurnRequest(**scope, conversation_id=conv, content="Q?"))
    reply = await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(**scope, conversation_id=conv, content="A.")
    )
    reply_id = reply.message.message_id
    rated = await ctl("feedback", *sc, "--message-id", reply_id, "up", "--comment", "spot on")
    assert rated == Result(0, f"message   {reply_id}\nfeedback  up\ncomment   spot on\n", "")
    stored = (await all_messages(memory.stub, scope, conv))[1]
    assert (stored.feedback, stored.comment) == (pb.FEEDBACK_UP, "spot on")

    shown = await ctl("conversation", *sc, "-c", conv)
    assert re.search(rf"^{STAMP}  assistant  {reply_id}  up {{8}}A\.$", shown.out, re.M)


async def test_episodes_finds_what_was_said_in_another_conversation(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    conv = new_id()
    said = "Both flagged accounts logged in from one Pixel tablet."
    await memory.stub.StartTurn(pb.StartTurnRequest(**scope, conversation_id=conv, content=said))
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(**scope, conversation_id=conv, content="Noted.")
    )
    found = await ctl("episodes", *sc, "which tablet did the accounts share", "--threshold", "0")
    assert found.code == 0, found
    lines = found.out.splitlines()
    assert re.fullmatch(r"SCORE  SAID +CONVERSATION +ROLE +MESSAGE", lines[0]), lines[0]
    assert re.fullmatch(rf"0\.\d{{3}}  {STAMP}  {conv}  user +{re.escape(said)}", lines[1]), lines
    assert len(lines) == 3 and lines[2].endswith("  assistant  Noted."), lines
    before = await ctl("episodes", *sc, "tablet", "--as-of-transaction", "2000-01-01T00:00:00Z")
    assert before == Result(0, "(no matching messages)\n", "")


async def test_facts_add_list_search_update_history_delete(ctl: Ctl, sc: list[str]) -> None:
    added = await ctl("facts", "add", *sc, "--kind", "preference", "Prefers answers in French")
    assert added.code == 0
    fact_id = field(added.out, "fact")
    first_version = field(added.out, "version")
    assert field(added.out, "text") == "Prefers answers in French"
    assert re.fullmatch(rf"{STAMP} \.\. -", field(added.out, "valid"))

    listed = await ctl("facts", "list", *sc)
    assert_lines(
        listed.out,
        [
            "FACT {34}KIND {8}VALID FROM {12}RECORDED {14}TEXT",
            rf"{fact_id}  preference  {STAMP}  {STAMP}  Prefers answers in French",
        ],
    )
    before = await ctl("facts", "list", *sc, "--as-of-transaction", "2000-01-01T00:00:00Z")
    assert before == Result(0, "(no facts)\n", "")

    found = await ctl("facts", "search", *sc, "answers in French", "--threshold", "0")
    assert found.code == 0
    assert re.search(rf"  {fact_id}  preference  Prefers answers in French$", found.out, re.M)

    updated = await ctl("facts", "update", *sc, fact_id, "-", stdin="Prefers answers in German\n")
    assert field(updated.out, "text") == "Prefers answers in German"
    new_version = field(updated.out, "version")

    history = await ctl("facts", "history", *sc, fact_id)
    assert_lines(
        history.out,
        [
            "AT {20}EVENT {3}VERSION {31}EXTRACTOR  CONVERSATION  DETAIL",
            rf"{STAMP}  ADD {{5}}{first_version}  manual {{5}}-",
            rf"{STAMP}  UPDATE  {new_version}  manual {{5}}- {{13}}supersedes {first_version}",
            "",
            r"\(no live links\)",
        ],
    )

    deleted = await ctl("facts", "delete", *sc, fact_id, "--ended")
    assert deleted == Result(0, f"deleted fact {fact_id}: true until now (history kept)\n", "")
    assert (await ctl("facts", "list", *sc)).out == "(no facts)\n"
    got = await ctl("facts", "get", *sc, fact_id)
    assert got.out.startswith(f"fact     {fact_id}\ncurrent  none (deleted)\n\nVERSION")


async def test_facts_get_and_history_print_live_links(ctl: Ctl, sc: list[str]) -> None:
    first = await ctl("facts", "add", *sc, "Caroline went to the LGBTQ support group on Monday")
    second = await ctl(
        "facts", "add", *sc, "Caroline found the LGBTQ support group inspiring and welcoming"
    )
    a, b = field(first.out, "fact"), field(second.out, "fact")
    b_version = field(second.out, "version")

    async def linked() -> bool:
        return b in (await ctl("facts", "get", *sc, a)).out

    await assert_eventually(linked, timeout_s=30, what="the link printed")
    for command in ("get", "history"):
        out = (await ctl("facts", command, *sc, a)).out
        assert_lines(
            out.split("\n\n")[-1],
            ["LINKED FACT {27}VERSION {31}SCORE  SINCE", rf"{b}  {b_version}  0\.\d{{3}}  {STAMP}"],
        )
    assert a in (await ctl("facts", "get", *sc, b)).out.split("\n\n")[-1]


async def test_facts_add_with_a_valid_time_prints_the_date_the_text_refers_to(
    ctl: Ctl, sc: list[str]
) -> None:
    added = await ctl(
        "facts",
        "add",
        *sc,
        "--valid-time",
        "2023-05-08T13:56:00Z",
        "Went to a support group yesterday",
    )
    assert added.code == 0, added
    assert field(added.out, "valid") == "2023-05-08T13:56:00Z .. -"
    assert field(added.out, "refers to") == "2023-05-07T13:56:00Z (day)"


async def test_start_turn_reads_content_from_stdin_for_dash(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    conv = new_id()
    result = await ctl("start-turn", *sc, "-c", conv, "-", stdin="Line one\nline two\n")
    assert result.code == 0
    [stored] = await all_messages(memory.stub, scope, conv)
    assert stored.content == "Line one\nline two"


async def test_unknown_conversation_exits_3_with_one_line_on_stderr(
    ctl: Ctl, sc: list[str]
) -> None:
    result = await ctl("conversation", *sc, "-c", "nope")
    assert result == Result(
        ExitCode.NOT_FOUND,
        "",
        "memoryctl: GetConversation failed: NOT_FOUND: conversation_id: no conversation 'nope'\n",
    )


async def test_invalid_username_or_empty_content_exits_4(ctl: Ctl, sc: list[str]) -> None:
    bad_user = await ctl("conversations", "-u", "a\nb", "-g", "G")
    assert bad_user == Result(
        ExitCode.INVALID_ARGUMENT,
        "",
        "memoryctl: ListConversations failed: INVALID_ARGUMENT: username: must not contain "
        "control characters (NUL, newline, …)\n",
    )
    empty = await ctl("start-turn", *sc, "-c", "c", "")
    assert empty == Result(
        4, "", "memoryctl: StartTurn failed: INVALID_ARGUMENT: content: must not be empty\n"
    )


async def test_nothing_listening_exits_5_without_traceback(sc: list[str]) -> None:
    target = f"127.0.0.1:{free_port()}"
    result = await memoryctl(target, "--timeout", "1", "conversations", *sc)
    assert result.code == ExitCode.UNAVAILABLE == 5
    assert result.out == ""
    assert result.err.startswith("memoryctl: ListConversations failed: UNAVAILABLE: ")
    assert result.err.count("\n") == 1


async def test_health_exits_as_its_help_says(sc: list[str]) -> None:
    target = f"127.0.0.1:{free_port()}"
    down = await memoryctl(target, "--timeout", "1", "health")
    assert down.code == ExitCode.UNAVAILABLE == 5
    helped = await memoryctl(target, "--help")
    assert "1 if it answers NOT_SERVING, 5 if unreachable" in " ".join(helped.out.split())


async def test_target_after_the_subcommand_overrides_the_one_before(
    memory: RunningServer, ctl: Ctl, sc: list[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    result = await memoryctl(dead, "conversations", *sc, "--target", memory.address)
    assert result == Result(0, "(no conversations)\n", "")


async def test_missing_user_or_naive_time_is_a_usage_error_2(ctl: Ctl) -> None:
    missing = await ctl("conversations", "-g", "G")
    assert missing.code == ExitCode.USAGE == 2
    assert missing.err.endswith(
        "memoryctl conversations: error: the following arguments are required: -u/--user\n"
    )
    naive = await ctl("facts", "list", "-u", "u", "-g", "G", "--as-of-valid", "2025-01-01T00:00")
    assert naive.code == 2
    assert naive.err.endswith(
        "error: argument --as-of-valid: '2025-01-01T00:00' has no timezone; "
        "add Z or an offset such as +02:00\n"
    )


async def test_delete_conversation_refuses_without_yes_and_deletes_with_it(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    conv = new_id()
    await memory.stub.StartTurn(pb.StartTurnRequest(**scope, conversation_id=conv, content="Hi"))
    at = [*sc, "-c", conv]
    refused = await ctl("delete-conversation", *at)
    assert refused == Result(
        2,
        "",
        f"memoryctl: delete-conversation erases conversation '{conv}' and all its messages; "
        "nothing was done. Pass --yes to confirm\n",
    )
    assert len(await all_messages(memory.stub, scope, conv)) == 1

    deleted = await ctl("delete-conversation", *at, "--yes")
    assert deleted == Result(0, f"deleted conversation {conv} (1 message)\n", "")
    assert (await ctl("conversation", *at)).code == 3


async def test_forget_scope_needs_yes_then_reports_what_it_erased(
    memory: RunningServer, ctl: Ctl, scope: dict[str, str], sc: list[str]
) -> None:
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Lives in Lisbon"))
    refused = await ctl("forget-scope", *sc)
    assert refused.code == 2
    erased = await ctl("forget-scope", *sc, "--yes")
    assert erased == Result(0, "facts     1\nversions  1\nmessages  0\n", "")


def test_help_lists_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for line in (
        "    2  usage error: bad arguments, a missing --yes, a time without a timezone",
        "    3  NOT_FOUND",
        "    4  INVALID_ARGUMENT",
        "    5  UNAVAILABLE or DEADLINE_EXCEEDED (try again later)",
        "    6  UNAUTHENTICATED or PERMISSION_DENIED",
        "    7  RESOURCE_EXHAUSTED",
    ):
        assert line in out.splitlines()

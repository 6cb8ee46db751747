"""graphrag-memory-migrate: chat-history's SQLite file, built here with GORM's exact schema and
go-sqlite3's timestamps, imported into real servers; a re-run inserts nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import socket
import sqlite3
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from memory_client.graphrag._legacy import (
    LegacyConversation,
    LegacyMessage,
    open_legacy,
    parse_timestamp,
    read_messages,
)
from memory_client.graphrag.migrate import (
    MigrationReport,
    cli,
    migrate,
    plan_conversations,
    summary,
)
from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, all_messages

GRAPH = "Finance"

# What GORM's AutoMigrate creates on SQLite for chat-history's structs (structs.go).
SCHEMA = """
CREATE TABLE conversations (id integer PRIMARY KEY AUTOINCREMENT, created_at datetime,
  updated_at datetime, deleted_at datetime, user_id text NOT NULL,
  conversation_id text NOT NULL UNIQUE, name text);
CREATE INDEX idx_conversations_deleted_at ON conversations(deleted_at);
CREATE TABLE messages (id integer PRIMARY KEY AUTOINCREMENT, created_at datetime,
  updated_at datetime, deleted_at datetime, conversation_id text NOT NULL,
  message_id text NOT NULL UNIQUE, parent_id text, model_name text, content text, role text,
  response_time real, feedback integer, comment text);
CREATE INDEX idx_messages_deleted_at ON messages(deleted_at);
"""
DELETED_AT = "2024-07-01 00:00:00.000000001+00:00"


def _user(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


class LegacyDB:
    """Writes chat-history rows the way GORM does (the test's side; the migration only reads)."""

    def __init__(self, path: Path, schema: str = SCHEMA) -> None:
        self.path = path
        with sqlite3.connect(path) as conn:
            conn.executescript(schema)
        conn.close()

    def _insert(self, table: str, row: dict[str, Any]) -> None:
        conn = sqlite3.connect(self.path)
        with conn:
            conn.execute(
                f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()),
            )
        conn.close()

    def conversation(
        self, user_id: str, name: str, *, deleted: bool = False, first_hex: str = ""
    ) -> str:
        conversation_id = str(uuid.uuid4())
        conversation_id = first_hex + conversation_id[len(first_hex) :]
        stamp = "2024-05-01 12:00:00.000000000+00:00"
        self._insert(
            "conversations",
            {
                "created_at": stamp,
                "updated_at": stamp,
                "deleted_at": DELETED_AT if deleted else None,
                "user_id": user_id,
                "conversation_id": conversation_id,
                "name": name,
            },
        )
        return conversation_id

    def message(
        self,
        conversation_id: str,
        content: str | None,
        created_at: object,
        *,
        role: str = "user",
        parent_id: str | None = None,
        model: str = "",
        response_time: float = 0.0,
        feedback: int = 0,
        comment: str = "",
        deleted: bool = False,
        message_id: str | None = None,
    ) -> str:
        message_id = message_id or str(uuid.uuid4())
        self._insert(
            "messages",
            {
                "created_at": created_at,
                "updated_at": created_at,
                "deleted_at": DELETED_AT if deleted else None,
                "conversation_id": conversation_id,
                "message_id": message_id,
                "parent_id": parent_id,
                "model_name": model,
                "content": content,
                "role": role,
                "response_time": response_time,
                "feedback": feedback,
                "comment": comment,
            },
        )
        return message_id


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def _fields(m: pb.Message) -> tuple[Any, ...]:
    created_at = m.created_at.ToDatetime(tzinfo=UTC)
    return (m.message_id, m.role, m.content, m.parent_id, m.model, m.feedback, m.comment,
            m.response_time_seconds, created_at)  # fmt: skip


class History:
    """Two users' chats, with everything the import must skip or keep."""

    def __init__(self, tmp_path: Path) -> None:
        db = self.db = LegacyDB(tmp_path / "chat-history.db")
        self.alice, self.bob = _user("alice"), _user("bob")
        # Sorted by id the revenue chat comes last, though the second chat is the more recent.
        self.revenue = db.conversation(self.alice, "Revenue questions", first_hex="f")
        self.second = db.conversation(self.alice, "Second chat", first_hex="0")
        self.schema = db.conversation(self.bob, "Bob's schema chat")
        gone = db.conversation(self.bob, "Deleted chat", deleted=True)

        c = self.revenue
        q1, a1, q2, a2 = (str(uuid.uuid4()) for _ in range(4))
        # Rows out of time order: the import orders by created_at, then id.
        db.message(c, "What was Q1 revenue?", "2024-05-01 12:34:56.123456789+00:00", message_id=q1)
        db.message(c, "And Q2?", "2024-05-01 12:35:10", parent_id=a1, message_id=q2)
        db.message(
            c,
            "Q1 revenue was $1.2M.",
            "2024-05-01T12:34:58.5Z",
            role="system",
            parent_id=q1,
            model="gpt-4o",
            response_time=2.5,
            feedback=1,
            comment="spot on",
            message_id=a1,
        )
        db.message(
            c,
            "Q2 was $1.4M.",
            "2024-05-01 14:35:12.000001999+02:00",
            role="system",
            parent_id=q2,
            model="gpt-4o",
            response_time=1.25,
            feedback=2,
            comment="wrong quarter",
            message_id=a2,
        )
        db.message(c, "never mind", "2024-05-01 12:36:00+00:00", deleted=True)
        db.message(c, "", "2024-05-01 12:36:01+00:00")
        db.message(c, None, "2024-05-01 12:36:02+00:00")
        db.message(c, '{"tool": "call"}', "2024-05-01 12:36:03+00:00", role="tool")
        self.revenue_ids = [q1, a1, q2, a2]

        hi = db.message(self.second, "Hi", 1714567000)  # integer epoch seconds
        hello = db.message(
            self.second, "Hello!", "2024-05-01 12:36:41+00:00", role="assistant", parent_id=hi
        )
        self.second_ids = [hi, hello]

        ask = db.message(self.schema, "Show me the schema", "2024-06-02 08:00:00.5+00:00")
        answer = db.message(
            self.schema,
            "It has Person and Account vertices.",
            "2024-06-02 08:00:03.25+00:00",
            role="system",
            parent_id=ask,
            response_time=3.0,
        )
        self.schema_ids = [ask, answer]

        db.message(gone, "in a deleted chat", "2024-05-02 09:00:00+00:00")
        db.message(gone, "also deleted chat", "2024-05-02 09:00:01+00:00", role="system")
        db.message(str(uuid.uuid4()), "no conversation", "2024-05-02 09:00:02+00:00")


def _assert_first_run(report: MigrationReport) -> None:
    assert (report.conversations_seen, report.conversations_imported) == (3, 3)
    assert (report.conversations_already_present, report.conversations_failed) == (0, 0)
    assert report.conversations_deleted == 1
    assert (report.messages_inserted, report.messages_skipped) == (8, 0)
    assert (report.messages_orphaned, report.messages_empty) == (3, 2)
    assert (report.messages_unsupported_role, report.messages_deleted) == (1, 1)
    assert report.parents_cleared == 0
    assert report.failures == [] and report.exit_code == 0


async def test_import_keeps_history_and_a_rerun_inserts_nothing(
    memory: RunningServer, tmp_path: Path
) -> None:
    h = History(tmp_path)
    before = _digest(h.db.path)
    # Three per batch: the revenue chat's fourth message names a parent in the first batch.
    report = await migrate(h.db.path, GRAPH, target=memory.address, batch_size=3)
    _assert_first_run(report)
    assert report.batches_planned == 4

    for user, expected in [
        (h.alice, {h.revenue: ("Revenue questions", 4), h.second: ("Second chat", 2)}),
        (h.bob, {h.schema: ("Bob's schema chat", 2)}),
    ]:
        listed = await memory.stub.ListConversations(
            pb.ListConversationsRequest(username=user, graphname=GRAPH)
        )
        got = {c.conversation_id: (c.name, c.message_count) for c in listed.conversations}
        assert got == expected
    # Most recently active first, as chat-history's newest messages say.
    listed = await memory.stub.ListConversations(
        pb.ListConversationsRequest(username=h.alice, graphname=GRAPH)
    )
    assert [c.conversation_id for c in listed.conversations] == [h.second, h.revenue]

    alice = {"username": h.alice, "graphname": GRAPH}
    revenue = await all_messages(memory.stub, alice, h.revenue)
    q1, a1, q2, a2 = h.revenue_ids
    assert [_fields(m) for m in revenue] == [
        (q1, pb.ROLE_USER, "What was Q1 revenue?", "", "", 0, "", 0.0,
         _at(2024, 5, 1, 12, 34, 56, 123456)),
        (a1, pb.ROLE_ASSISTANT, "Q1 revenue was $1.2M.", q1, "gpt-4o", pb.FEEDBACK_UP,
         "spot on", 2.5, _at(2024, 5, 1, 12, 34, 58, 500000)),
        (q2, pb.ROLE_USER, "And Q2?", a1, "", 0, "", 0.0, _at(2024, 5, 1, 12, 35, 10)),
        (a2, pb.ROLE_ASSISTANT, "Q2 was $1.4M.", q2, "gpt-4o", pb.FEEDBACK_DOWN,
         "wrong quarter", 1.25, _at(2024, 5, 1, 12, 35, 12, 1)),
    ]  # fmt: skip
    second = await all_messages(memory.stub, alice, h.second)
    assert [(m.message_id, m.role, m.parent_id) for m in second] == [
        (h.second_ids[0], pb.ROLE_USER, ""),
        (h.second_ids[1], pb.ROLE_ASSISTANT, h.second_ids[0]),
    ]
    assert second[0].created_at.ToDatetime(tzinfo=UTC) == _at(2024, 5, 1, 12, 36, 40)
    bob = await all_messages(memory.stub, {"username": h.bob, "graphname": GRAPH}, h.schema)
    assert [m.message_id for m in bob] == h.schema_ids
    assert bob[1].response_time_seconds == 3.0

    again = await migrate(h.db.path, GRAPH, target=memory.address)
    assert (again.messages_inserted, again.messages_skipped) == (0, 8)
    assert (again.conversations_imported, again.conversations_already_present) == (0, 3)
    assert again.exit_code == 0
    assert await all_messages(memory.stub, alice, h.revenue) == revenue
    assert await all_messages(memory.stub, alice, h.second) == second
    assert _digest(h.db.path) == before  # read-only: the legacy file is untouched


async def test_a_refused_batch_fails_only_its_conversation(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    server = await start_server(max_message_bytes=1024)
    db = LegacyDB(tmp_path / "chat-history.db")
    carol = _user("carol")
    fine = db.conversation(carol, "fine")
    db.message(fine, "short question", "2024-05-01 10:00:00+00:00")
    db.message(fine, "short answer", "2024-05-01 10:00:01+00:00", role="system")
    big = db.conversation(carol, "too big")
    db.message(big, "a small first message", "2024-05-01 11:00:00+00:00")
    db.message(big, "x" * 2000, "2024-05-01 11:00:01+00:00", role="system")
    late = db.conversation(carol, "big in its second batch")
    for i in range(2):
        db.message(late, f"fits {i}", f"2024-05-01 12:00:0{i}+00:00")
    db.message(late, "y" * 2000, "2024-05-01 12:00:05+00:00", role="system")
    spaced = db.conversation(f"{_user('dave')} ", "user id with a trailing space")
    db.message(spaced, "hello", "2024-05-01 13:00:00+00:00")

    report = await migrate(db.path, GRAPH, target=server.address, batch_size=2)

    assert report.exit_code == 1
    assert (report.conversations_imported, report.conversations_failed) == (1, 3)
    reasons = {f.conversation_id: f.reason for f in report.failures}
    assert reasons.keys() == {big, late, spaced}
    assert reasons[big].startswith("INVALID_ARGUMENT: messages[1].content: is 2000 bytes")
    assert reasons[late].startswith("INVALID_ARGUMENT: messages[0].content")
    assert reasons[spaced].startswith("INVALID_ARGUMENT: username")
    assert report.messages_inserted == 4  # fine's two, and late's first batch
    assert summary(report).count("\nfailed: user ") == 3

    scope = {"username": carol, "graphname": GRAPH}
    listed = await server.stub.ListConversations(pb.ListConversationsRequest(**scope))
    assert {c.conversation_id for c in listed.conversations} == {fine, late}
    # One transaction per batch: nothing of a refused batch is stored.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await all_messages(server.stub, scope, big)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert [m.content for m in await all_messages(server.stub, scope, late)] == ["fits 0", "fits 1"]


async def test_an_unreadable_time_fails_its_conversation_and_is_never_now(
    memory: RunningServer, tmp_path: Path
) -> None:
    db = LegacyDB(tmp_path / "chat-history.db")
    erin = _user("erin")
    good = db.conversation(erin, "good")
    db.message(good, "fine", "2024-05-01 10:00:00.999999999+00:00")
    bad = db.conversation(erin, "bad")
    db.message(bad, "first", "2024-05-01 10:00:00+00:00")
    db.message(bad, "when?", "last tuesday")

    report = await migrate(db.path, GRAPH, target=memory.address)

    assert report.exit_code == 1 and report.conversations_imported == 1
    [failure] = report.failures
    assert failure.conversation_id == bad
    assert "created_at: 'last tuesday' is not a time" in failure.reason
    listed = await memory.stub.ListConversations(
        pb.ListConversationsRequest(username=erin, graphname=GRAPH)
    )
    assert [c.conversation_id for c in listed.conversations] == [good]


def _run_cli(argv: list[str]) -> int | str | None:
    """cli() in a worker thread: asyncio.run needs a thread without a running loop, and a
    SystemExit must not reach the test's event loop."""
    try:
        cli(argv)
    except SystemExit as exc:
        return exc.code
    return None


async def test_dry_run_needs_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = History(tmp_path)
    nowhere = f"127.0.0.1:{_free_port()}"
    argv = ["--sqlite", str(h.db.path), "--graph", GRAPH, "--target", nowhere, "--dry-run"]
    assert await asyncio.to_thread(_run_cli, [*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is True and report["exit_code"] == 0
    assert (report["conversations_planned"], report["messages_planned"]) == (3, 8)
    assert (report["messages_orphaned"], report["messages_empty"]) == (3, 2)
    assert report["messages_inserted"] == 0

    h.db.message(h.schema, "broken", "2024-02-30 10:00:00")
    assert await asyncio.to_thread(_run_cli, argv) == 1
    out = capsys.readouterr().out
    assert "conversations: 3 seen, 2 to import, 1 failed" in out
    assert f'conversation {h.schema} ("Bob\'s schema chat"): message ' in out
    assert "'2024-02-30 10:00:00' is not a valid time" in out


async def test_unreadable_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.db"
    no_messages = tmp_path / "no-messages.db"
    LegacyDB(no_messages, schema=SCHEMA.split("CREATE TABLE messages")[0])
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database\n" * 100)
    for path, says in [
        (missing, "no such file"),
        (no_messages, "no table 'messages'"),
        (not_sqlite, "cannot read it as SQLite"),
    ]:
        code = await asyncio.to_thread(_run_cli, ["--sqlite", str(path), "--graph", GRAPH])
        assert code == 2
        assert says in capsys.readouterr().err
    assert not missing.exists()
    assert await asyncio.to_thread(_run_cli, ["--sqlite", str(no_messages), "--graph", " x"]) == 2


async def _migrate_command(*args: str, script: bool = False) -> tuple[int, str, str]:
    if script:
        found = shutil.which("graphrag-memory-migrate", path=str(Path(sys.executable).parent))
        assert found, "graphrag-memory-migrate is not installed: pip install -e ."
        command = [found]
    else:
        command = [sys.executable, "-m", "memory_client.graphrag.migrate"]
    process = await asyncio.create_subprocess_exec(
        *command,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_command_imports_then_skips(memory: RunningServer, tmp_path: Path) -> None:
    h = History(tmp_path)
    args = ["--sqlite", str(h.db.path), "--graph", GRAPH, "--target", memory.address]
    code, out, err = await _migrate_command(*args)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"chat-history {h.db.path} -> graph {GRAPH}",
        "conversations: 3 seen, 3 imported, 0 already present, 0 failed, 0 without messages; "
        "1 soft-deleted, skipped",
        "messages: 8 inserted, 0 skipped (already present), 3 orphaned, 2 empty, "
        "1 unsupported_role; 1 soft-deleted, skipped",
    ]
    code, out, err = await _migrate_command(*args, "--json", script=True)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert (report["messages_inserted"], report["messages_skipped"]) == (0, 8)
    assert report["conversations_already_present"] == 3


async def test_an_unreachable_server_exits_5(tmp_path: Path) -> None:
    h = History(tmp_path)
    nowhere = f"127.0.0.1:{_free_port()}"
    args = ["--sqlite", str(h.db.path), "--graph", GRAPH, "--target", nowhere, "--timeout", "5"]
    code, out, _ = await _migrate_command(*args)
    assert code == 5
    assert "aborted: UNAVAILABLE" in out


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("2024-05-01 12:34:56.123456789+00:00", _at(2024, 5, 1, 12, 34, 56, 123456)),
        ("2024-05-01T12:34:56.123456789Z", _at(2024, 5, 1, 12, 34, 56, 123456)),
        ("2024-05-01 12:34:56.123456789", _at(2024, 5, 1, 12, 34, 56, 123456)),
        ("2024-05-01 14:34:56.123456789+02:00", _at(2024, 5, 1, 12, 34, 56, 123456)),
        ("2024-05-01 08:04:56.1234567-04:30", _at(2024, 5, 1, 12, 34, 56, 123456)),
        ("2024-05-01 12:34:56.5+0000", _at(2024, 5, 1, 12, 34, 56, 500000)),
        ("2024-05-01 12:34:56", _at(2024, 5, 1, 12, 34, 56)),
        ("2024-05-01t12:34z", _at(2024, 5, 1, 12, 34)),
        ("2024-05-01", _at(2024, 5, 1)),
        (" 2024-05-01 12:34:56+00:00 ", _at(2024, 5, 1, 12, 34, 56)),
        (b"2024-05-01 12:34:56+00:00", _at(2024, 5, 1, 12, 34, 56)),
        (1714566896, _at(2024, 5, 1, 12, 34, 56)),
        (1714566896.25, _at(2024, 5, 1, 12, 34, 56, 250000)),
        ("1714566896", _at(2024, 5, 1, 12, 34, 56)),
    ],
)
def test_parse_timestamp(stored: object, expected: datetime) -> None:
    parsed = parse_timestamp(stored)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "",
        "yesterday",
        "2024-13-01 00:00:00",
        "2024-05-01 25:00:00",
        "2024-05-01 12:34:56+25:00",
        "2024-05-01 12:34:56 UTC",
        float("nan"),
        10**20,
    ],
)
def test_parse_timestamp_refuses(stored: object) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(stored)


def _row(row_id: int, conversation_id: str, message_id: str, **fields: Any) -> LegacyMessage:
    values: dict[str, Any] = {
        "parent_id": "",
        "model": "",
        "content": f"message {row_id}",
        "role": "user",
        "response_time_seconds": 0.0,
        "feedback": 0,
        "comment": "",
        "created_at": _at(2024, 5, 1, 12, 0, row_id),
        "deleted": False,
    }
    values.update(fields)
    return LegacyMessage(row_id, conversation_id, message_id, **values)


def test_planner_merges_repeats_generates_ids_and_clears_dangling_parents() -> None:
    chat = LegacyConversation(1, "frank", "chat", "Chat", deleted=False)
    idle = LegacyConversation(2, "frank", "idle", "No messages", deleted=False)
    rows = [
        _row(1, "chat", "a"),
        _row(2, "chat", "b", role="system", parent_id="a"),
        # Old chat-history recorded feedback by writing the message again.
        _row(3, "chat", "b", role="system", parent_id="a", feedback=1, comment="late"),
        _row(4, "chat", "c", parent_id="deleted-one"),
        _row(5, "chat", "", content="no id"),
        _row(6, "chat", "deleted-one", deleted=True),
        _row(7, "elsewhere", "z"),
    ]
    report = MigrationReport("x.db", GRAPH)
    [plan, empty] = plan_conversations([chat, idle], rows, report, batch_size=2)
    assert empty.conversation is idle and empty.batches == []
    assert plan.conversation is chat and plan.problems == []
    ids = [[m.message_id for m in batch] for batch in plan.batches]
    assert ids == [["a", "b"], ["c", "chat-history-5"]]
    b = plan.batches[0][1]
    assert (b.feedback, b.comment, b.parent_id) == (pb.FEEDBACK_UP, "late", "a")
    assert b.created_at.ToDatetime(tzinfo=UTC) == _at(2024, 5, 1, 12, 0, 2)  # the first row's
    assert plan.batches[1][0].parent_id == ""
    assert report.messages_duplicate == 1
    assert report.messages_id_generated == 1
    assert report.parents_cleared == 1
    assert (report.messages_deleted, report.messages_orphaned) == (1, 1)

    big = [_row(i, "chat", f"m{i}", content="x" * 60) for i in range(3)]
    [split] = plan_conversations([chat], big, MigrationReport("x.db", GRAPH), max_batch_bytes=200)
    assert [len(batch) for batch in split.batches] == [2, 1]

    with pytest.raises(ValueError, match="not grouped"):
        list(plan_conversations([chat], [rows[0], rows[-1], rows[1]], report))


def test_reader_accepts_the_older_schema(tmp_path: Path) -> None:
    # Before response_time existed, and with the JSON key `model` as the column's name.
    old = SCHEMA.replace("model_name text", "model text").replace("response_time real, ", "")
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(old)
        conn.execute(
            "INSERT INTO messages (created_at, conversation_id, message_id, model, content, role)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            ("2024-05-01 12:00:00+00:00", "c", "00000000-0000-0000-0000-000000000000", "gpt-4",
             "hi", "system"),
        )  # fmt: skip
    conn.close()
    legacy = open_legacy(db)
    [message] = list(read_messages(legacy))
    legacy.close()
    assert (message.model, message.response_time_seconds, message.problems) == ("gpt-4", 0.0, ())
    assert message.message_id == ""  # the nil UUID is no id

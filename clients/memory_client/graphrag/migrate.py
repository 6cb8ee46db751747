"""Imports GraphRAG chat-history's SQLite database into graphrag-memory, idempotently.

    python -m memory_client.graphrag.migrate --sqlite chat-history.db --graph MyGraph

Three parts, each testable alone: the reader (`_legacy`: SQLite → typed records), the planner
(`plan_conversations`: records → batches of NewMessage per conversation, counting what it leaves
out) and the importer (`migrate`: batches → AppendMessages through AsyncMemoryClient). Every
message keeps its legacy id, so the server skips what it already has: a re-run inserts nothing,
and the client may retry UNAVAILABLE. One AppendMessages call is one transaction, so a refused
batch writes nothing; it fails its conversation only, and the others go on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.client import AsyncMemoryClient
from memory_client.errors import MemoryClientError
from memory_client.graphrag import _legacy
from memory_client.graphrag._legacy import LegacyConversation, LegacyDataError, LegacyMessage
from memory_client.v1 import memory_pb2 as pb

__all__ = ["LegacyDataError", "MigrationReport", "cli", "migrate", "plan_conversations", "summary"]

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_BATCH_SIZE = 500
DEFAULT_TIMEOUT_S = 60.0
# Under gRPC's default 4 MiB limit on a received message, with room for the request's other
# fields (a server may keep the default even though ours raises it).
MAX_BATCH_BYTES = 4_000_000
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 5

# In GraphRAG "system" is the assistant's reply, not a system prompt.
_ROLES = {"user": pb.ROLE_USER, "system": pb.ROLE_ASSISTANT, "assistant": pb.ROLE_ASSISTANT}
# Every later call would meet these too: stop, rather than fail each conversation in turn.
_FATAL = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
}
_EARLIEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Failure:
    username: str
    conversation_id: str
    name: str
    reason: str


@dataclass
class MigrationReport:
    """What a run did (with dry_run: would send). Each message row is counted once."""

    sqlite: str
    graphname: str
    dry_run: bool = False
    conversations_seen: int = 0  # not soft-deleted
    conversations_planned: int = 0  # with messages to send
    conversations_imported: int = 0  # at least one message inserted
    conversations_already_present: int = 0  # every message was already there
    conversations_failed: int = 0
    conversations_without_messages: int = 0  # nothing importable, so not created
    conversations_deleted: int = 0  # soft-deleted, skipped
    messages_planned: int = 0
    batches_planned: int = 0
    messages_inserted: int = 0
    messages_skipped: int = 0  # already present
    messages_orphaned: int = 0  # their conversation is missing or soft-deleted
    messages_empty: int = 0
    messages_unsupported_role: int = 0
    messages_deleted: int = 0  # soft-deleted, skipped
    messages_duplicate: int = 0  # a repeated message_id (old schemas had no unique index)
    messages_id_generated: int = 0  # no message_id: given "chat-history-<row id>"
    parents_cleared: int = 0  # parent_id naming no earlier imported message of the conversation
    failures: list[Failure] = field(default_factory=list)
    aborted: str = ""  # why the run stopped early, if it did
    unreachable: bool = False

    @property
    def exit_code(self) -> int:
        if self.unreachable:
            return EXIT_UNAVAILABLE
        return EXIT_FAILED if self.aborted or self.failures else EXIT_OK


@dataclass(frozen=True)
class ConversationPlan:
    conversation: LegacyConversation
    batches: list[list[pb.NewMessage]]
    problems: list[str]  # when not empty, nothing is sent for the conversation


def plan_conversations(
    conversations: Iterable[LegacyConversation],
    messages: Iterable[LegacyMessage],
    report: MigrationReport,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> Iterator[ConversationPlan]:
    """One plan per live conversation; what is left out is counted into `report`. `messages`
    must be grouped by conversation_id, as `read_messages` yields them."""
    live: dict[str, LegacyConversation] = {}
    for conversation in conversations:
        if conversation.deleted:
            report.conversations_deleted += 1
        else:
            live[conversation.conversation_id] = conversation
    report.conversations_seen = len(live)
    done: set[str] = set()
    for conversation_id, group in groupby(messages, key=lambda m: m.conversation_id):
        if conversation_id in done:
            raise ValueError(f"messages of {conversation_id!r} are not grouped together")
        done.add(conversation_id)
        rows = list(group)
        owner = live.get(conversation_id)
        if owner is None:
            report.messages_deleted += sum(m.deleted for m in rows)
            report.messages_orphaned += sum(not m.deleted for m in rows)
        else:
            yield _plan(owner, rows, report, batch_size, max_batch_bytes)
    yield from (ConversationPlan(c, [], []) for i, c in live.items() if i not in done)


def _plan(
    conversation: LegacyConversation,
    rows: list[LegacyMessage],
    report: MigrationReport,
    batch_size: int,
    max_batch_bytes: int,
) -> ConversationPlan:
    # message_id → (its first row, which gives its time and place; its newest row, which gives
    # the rest: old chat-history versions recorded feedback by writing the message again)
    kept: dict[str, tuple[LegacyMessage, LegacyMessage]] = {}
    problems: list[str] = []
    for row in rows:
        if row.deleted:
            report.messages_deleted += 1
        elif not row.content.strip():
            report.messages_empty += 1
        elif row.role.strip().lower() not in _ROLES:
            report.messages_unsupported_role += 1
        else:
            message_id = row.message_id
            if not message_id:
                message_id = f"chat-history-{row.row_id}"
                report.messages_id_generated += 1
            problems.extend(f"message {message_id}: {p}" for p in row.problems)
            if message_id in kept:
                report.messages_duplicate += 1
            kept[message_id] = (kept.get(message_id, (row, row))[0], row)
    if problems:
        return ConversationPlan(conversation, [], problems)
    ordered = sorted(
        kept.items(), key=lambda kv: (kv[1][0].created_at or _EARLIEST, kv[1][0].row_id)
    )
    known: set[str] = set()
    planned: list[pb.NewMessage] = []
    for message_id, (first, newest) in ordered:
        parent_id = newest.parent_id
        if parent_id and parent_id not in known:
            # The server refuses a parent it has not stored in this conversation; one that was
            # deleted, empty or elsewhere is not worth failing the conversation for.
            report.parents_cleared += 1
            parent_id = ""
        known.add(message_id)
        assert first.created_at is not None  # a row without one has a problem
        stamp = Timestamp()
        stamp.FromDatetime(first.created_at)
        planned.append(
            pb.NewMessage(
                message_id=message_id,
                role=_ROLES[newest.role.strip().lower()],
                content=newest.content,
                model=newest.model,
                parent_id=parent_id,
                response_time_seconds=newest.response_time_seconds,
                feedback=pb.Feedback.ValueType(newest.feedback),
                comment=newest.comment,
                created_at=stamp,
            )
        )
    return ConversationPlan(conversation, _batches(planned, batch_size, max_batch_bytes), [])


def _batches(
    messages: list[pb.NewMessage], batch_size: int, max_bytes: int
) -> list[list[pb.NewMessage]]:
    batches: list[list[pb.NewMessage]] = []
    size = 0
    for message in messages:
        n = message.ByteSize() + 8  # with the repeated field's tag and length
        if not batches or len(batches[-1]) >= batch_size or size + n > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += n
    return batches


def _fail(report: MigrationReport, conversation: LegacyConversation, reason: str) -> None:
    report.conversations_failed += 1
    c = conversation
    report.failures.append(Failure(c.user_id, c.conversation_id, c.name, reason))


def _count_plan(report: MigrationReport, plan: ConversationPlan) -> bool:
    """Records the plan; True when it has something to send."""
    if plan.problems:
        more = f" (and {len(plan.problems) - 3} more)" if len(plan.problems) > 3 else ""
        _fail(report, plan.conversation, "; ".join(plan.problems[:3]) + more)
    elif not plan.batches:
        report.conversations_without_messages += 1
    else:
        report.conversations_planned += 1
        report.messages_planned += sum(len(b) for b in plan.batches)
        report.batches_planned += len(plan.batches)
        return True
    return False


async def _import(
    client: AsyncMemoryClient, graphname: str, plan: ConversationPlan, report: MigrationReport
) -> None:
    c = plan.conversation
    inserted = skipped = 0
    error = ""
    for batch in plan.batches:
        try:
            response = await client.append_messages(
                c.user_id, graphname, c.conversation_id, batch, conversation_name=c.name
            )
        except MemoryClientError as exc:
            error = f"{exc.code.name}: {exc.details}"
            if exc.code in _FATAL:
                report.unreachable = exc.code == grpc.StatusCode.UNAVAILABLE
                report.aborted = error
            break  # later batches may name parents in this one
        inserted += response.inserted
        skipped += response.skipped
    report.messages_inserted += inserted
    report.messages_skipped += skipped
    if report.aborted:
        return  # unfinished rather than refused: the next run completes it
    if error:
        _fail(report, c, error)
    elif inserted:
        report.conversations_imported += 1
    else:
        report.conversations_already_present += 1


async def migrate(
    sqlite_path: str | Path,
    graphname: str,
    *,
    target: str = DEFAULT_TARGET,
    token: str | None = None,
    tls: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
) -> MigrationReport:
    """Imports every live conversation of the chat-history database at `sqlite_path` into
    `graphname`, one conversation after another. Raises LegacyDataError when the file cannot be
    read; what the server refused is in the report. `dry_run` reads and plans, needs no server."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    report = MigrationReport(sqlite=str(sqlite_path), graphname=graphname, dry_run=dry_run)
    # SQLite is read in a worker thread, one call at a time, so the event loop (which may be
    # serving other work) never waits on the disk.
    conn = await asyncio.to_thread(_legacy.open_legacy, sqlite_path)
    client = None
    try:
        conversations = await asyncio.to_thread(_legacy.read_conversations, conn)
        plans = plan_conversations(
            conversations, _legacy.read_messages(conn), report, batch_size=batch_size
        )
        if not dry_run:
            client = AsyncMemoryClient(target, timeout_s=timeout_s, tls=tls, token=token)
        while (plan := await asyncio.to_thread(next, plans, None)) is not None:
            if _count_plan(report, plan) and client is not None:
                await _import(client, graphname, plan, report)
                if report.aborted:
                    break
        return report
    finally:
        if client is not None:
            await client.close()
        conn.close()


def summary(report: MigrationReport) -> str:
    """The short human summary the command prints."""
    r = report
    if r.dry_run:
        done = f"{r.conversations_planned} to import"
        sent = f"{r.messages_planned} to send in {r.batches_planned} batches"
    else:
        done = f"{r.conversations_imported} imported, {r.conversations_already_present} already"
        done += " present"
        sent = f"{r.messages_inserted} inserted, {r.messages_skipped} skipped (already present)"
    lines = [
        f"chat-history {r.sqlite} -> graph {r.graphname}{' (dry run)' if r.dry_run else ''}",
        f"conversations: {r.conversations_seen} seen, {done}, {r.conversations_failed} failed, "
        f"{r.conversations_without_messages} without messages; "
        f"{r.conversations_deleted} soft-deleted, skipped",
        f"messages: {sent}, {r.messages_orphaned} orphaned, {r.messages_empty} empty, "
        f"{r.messages_unsupported_role} unsupported_role; "
        f"{r.messages_deleted} soft-deleted, skipped",
    ]
    if r.messages_duplicate or r.messages_id_generated or r.parents_cleared:
        lines.append(
            f"adjusted: {r.messages_duplicate} repeated message ids merged, "
            f"{r.messages_id_generated} ids generated, {r.parents_cleared} parent ids cleared"
        )
    lines += [
        f"failed: user {f.username!r} conversation {f.conversation_id} ({f.name!r}): "
        + " ".join(f.reason.split())
        for f in r.failures
    ]
    if r.aborted:
        lines.append(
            f"aborted: {r.aborted}; the counts cover what was read until then. Run again: "
            "messages already imported are skipped"
        )
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="graphrag-memory-migrate",
        description="Import GraphRAG chat-history's SQLite database into graphrag-memory. "
        "Idempotent: a re-run inserts nothing that is already there.",
        epilog="exit status: 0 all imported or already present; 1 a conversation failed "
        "(listed) or the server refused the run; 2 usage error or unreadable database; "
        "5 server unreachable",
    )
    p.add_argument("--sqlite", required=True, metavar="PATH", help="chat-history's database")
    p.add_argument("--graph", required=True, metavar="NAME", help="graphname to import into")
    p.add_argument(
        "--target",
        default=os.environ.get("MEMORYCTL_TARGET", DEFAULT_TARGET),
        metavar="HOST:PORT",
        help=f"the memory service (default $MEMORYCTL_TARGET, else {DEFAULT_TARGET})",
    )
    # From the environment by default, as for memoryctl: a token on the command line shows in ps.
    p.add_argument(
        "--token",
        default=os.environ.get("MEMORYCTL_TOKEN") or None,
        help="bearer token sent with every call (default $MEMORYCTL_TOKEN)",
    )
    p.add_argument("--tls", action="store_true", help="connect with TLS (system roots)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"per call, retries included (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"messages per call (default {DEFAULT_BATCH_SIZE}; a call also stays under 4 MB)",
    )
    p.add_argument("--dry-run", action="store_true", help="read and plan only; no server needed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def cli(argv: Sequence[str] | None = None) -> None:
    """The console script: runs the migration and exits with its status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.graph.strip() or args.graph != args.graph.strip():
        parser.error("--graph must be non-empty, without leading or trailing whitespace")
    if args.batch_size < 1 or not args.timeout > 0:
        parser.error("--batch-size and --timeout must be positive")
    options = {k: getattr(args, k) for k in ("target", "token", "tls", "batch_size", "dry_run")}
    try:
        report = asyncio.run(migrate(args.sqlite, args.graph, timeout_s=args.timeout, **options))
    except LegacyDataError as exc:
        sys.stderr.write(f"graphrag-memory-migrate: {exc}\n")
        raise SystemExit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if args.json:
        sys.stdout.write(json.dumps({**asdict(report), "exit_code": report.exit_code}) + "\n")
    else:
        sys.stdout.write(summary(report))
    sys.stdout.flush()
    raise SystemExit(report.exit_code)


if __name__ == "__main__":
    cli()

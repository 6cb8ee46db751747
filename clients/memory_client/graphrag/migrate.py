"""Imports GraphRAG chat-history's SQLite database into graphrag-memory, idempotently.

    python -m memory_client.graphrag.migrate --sqlite chat-history.db --graph MyGraph

Three parts, each testable alone: the reader (`_legacy`: SQLite → typed records), the planner
(`_plan.plan_conversations`: records → batches of NewMessage per conversation, counting what it
leaves out) and the importer (`migrate`, here: batches → AppendMessages through
AsyncMemoryClient); what they count goes into one `MigrationReport` (`_report`). Every
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
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import grpc

from memory_client.client import AsyncMemoryClient
from memory_client.errors import MemoryClientError
from memory_client.graphrag import _legacy
from memory_client.graphrag._legacy import LegacyDataError
from memory_client.graphrag._plan import DEFAULT_BATCH_SIZE, ConversationPlan, plan_conversations
from memory_client.graphrag._report import EXIT_USAGE, MigrationReport, summary

__all__ = ["LegacyDataError", "MigrationReport", "cli", "migrate", "plan_conversations", "summary"]

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 60.0

# Every later call would meet these too: stop, rather than fail each conversation in turn.
_FATAL = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
}


def _count_plan(report: MigrationReport, plan: ConversationPlan) -> bool:
    """Records the plan; True when it has something to send."""
    if plan.problems:
        more = f" (and {len(plan.problems) - 3} more)" if len(plan.problems) > 3 else ""
        report.fail(plan.conversation, "; ".join(plan.problems[:3]) + more)
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
        report.fail(c, error)
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

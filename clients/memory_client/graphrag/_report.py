"""What a migration run did, counted as it goes: the report `migrate` returns, its exit status,
and the short summary the command prints."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory_client.graphrag._legacy import LegacyConversation

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "Failure",
    "MigrationReport",
    "summary",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 5


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

    def fail(self, conversation: LegacyConversation, reason: str) -> None:
        """Counts `conversation` as failed, for `reason` (listed in the summary)."""
        self.conversations_failed += 1
        c = conversation
        self.failures.append(Failure(c.user_id, c.conversation_id, c.name, reason))


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

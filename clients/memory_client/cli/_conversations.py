"""Commands for health, turns, context and conversation history. Each takes the client, the
parsed arguments and the output, and returns the exit status; a failed RPC raises
MemoryClientError, which `main` reports."""

from __future__ import annotations

import argparse

from grpc_health.v1 import health_pb2

from memory_client.cli._common import collect, require_yes, text_of
from memory_client.cli._exit import ExitCode
from memory_client.cli._output import Column, Output, feedback, plural, role, timestamp
from memory_client.client import MemoryClient
from memory_client.v1 import memory_pb2 as pb

FEEDBACK = {"none": pb.FEEDBACK_NONE, "up": pb.FEEDBACK_UP, "down": pb.FEEDBACK_DOWN}

_CONVERSATION_COLUMNS = (
    Column("ID", 48),
    Column("NAME", 32),
    Column("MESSAGES", right=True),
    Column("UPDATED"),
)
_MESSAGE_COLUMNS = (
    Column("TIME"),
    Column("ROLE"),
    Column("ID", 48),
    Column("FEEDBACK"),
    Column("CONTENT", 60),
)


def health(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    serving = client.health(args.service)
    response = health_pb2.HealthCheckResponse
    status = response.SERVING if serving else response.NOT_SERVING
    if out.json:
        out.message_json(response(status=status))
    else:
        out.line(response.ServingStatus.Name(status))
    return ExitCode.OK if serving else ExitCode.FAILED


def _context_figures(context: pb.MemoryContext) -> str:
    return (
        f"{context.total_tokens} of {context.budget_tokens} tokens "
        f"(summary {context.summary_tokens}, recent {context.recent_tokens}, "
        f"long-term {context.long_term.tokens}); "
        f"{plural(len(context.recent_messages), 'recent message')}, "
        f"{context.omitted_messages} omitted; "
        f"{plural(len(context.long_term.facts), 'fact')} recalled"
    )


def _context_notes(context: pb.MemoryContext) -> list[tuple[str, str]]:
    if context.long_term.degraded:
        return [("long-term", f"degraded: {context.long_term.degraded_reason}")]
    return []


def start_turn(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = client.start_turn(
        args.username,
        args.graphname,
        conversation_id=args.conversation_id,
        content=text_of(args.content),
        message_id=args.message_id,
        conversation_name=args.name,
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    created = " (created)" if response.conversation_created else ""
    out.fields(
        [
            ("message", response.message.message_id),
            ("conversation", f"{args.conversation_id}{created}"),
            ("tokens", str(response.message.tokens)),
            ("context", _context_figures(response.context)),
            *_context_notes(response.context),
        ]
    )
    out.line()
    out.block(response.context.rendered)
    return ExitCode.OK


def complete_turn(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = client.complete_turn(
        args.username,
        args.graphname,
        conversation_id=args.conversation_id,
        content=text_of(args.content),
        model=args.model,
        parent_id=args.parent_id,
        response_time_seconds=args.response_time,
        message_id=args.message_id,
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    message = response.message
    out.fields(
        [
            ("message", message.message_id),
            ("parent", message.parent_id or "-"),
            ("model", message.model or "-"),
            ("tokens", str(message.tokens)),
            ("compacted", "inline" if response.compacted_inline else "queued"),
        ]
    )
    return ExitCode.OK


def context(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = client.get_context(
        args.username, args.graphname, conversation_id=args.conversation_id, question=args.question
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    out.block(response.context.rendered)
    out.line()
    notes = [("tokens", _context_figures(response.context)), *_context_notes(response.context)]
    if not response.conversation_exists:
        notes.append(("conversation", f"{args.conversation_id} does not exist yet"))
    out.fields(notes)
    return ExitCode.OK


def conversations(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = collect(
        lambda token: client.list_conversations(
            args.username, args.graphname, page_size=args.page_size, page_token=token
        ),
        args.page_token,
        "conversations",
        follow=args.all,
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    rows = [
        [c.conversation_id, c.name, str(c.message_count), timestamp(c.updated_at)]
        for c in response.conversations
    ]
    out.table(_CONVERSATION_COLUMNS, rows, empty="no conversations")
    out.next_page(response.next_page_token)
    return ExitCode.OK


def conversation(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = collect(
        lambda token: client.get_conversation(
            args.username,
            args.graphname,
            conversation_id=args.conversation_id,
            page_size=args.page_size,
            page_token=token,
        ),
        args.page_token,
        "messages",
        follow=args.all,
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    about = response.conversation
    out.fields(
        [
            ("conversation", about.conversation_id),
            ("name", about.name or "-"),
            ("messages", str(about.message_count)),
            ("created", timestamp(about.created_at)),
        ]
    )
    out.line()
    rows = [
        [timestamp(m.created_at), role(m.role), m.message_id, feedback(m.feedback), m.content]
        for m in response.messages
    ]
    out.table(_MESSAGE_COLUMNS, rows, empty="no messages")
    out.next_page(response.next_page_token)
    return ExitCode.OK


def submit_feedback(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = client.submit_feedback(
        args.username,
        args.graphname,
        message_id=args.message_id,
        feedback=FEEDBACK[args.feedback],
        comment=args.comment,
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    message = response.message
    out.fields(
        [
            ("message", message.message_id),
            ("feedback", feedback(message.feedback)),
            ("comment", message.comment or "-"),
        ]
    )
    return ExitCode.OK


def rename(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    response = client.rename_conversation(
        args.username, args.graphname, conversation_id=args.conversation_id, name=args.new_name
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    renamed = response.conversation
    out.fields([("conversation", renamed.conversation_id), ("name", renamed.name)])
    return ExitCode.OK


def delete_conversation(client: MemoryClient, args: argparse.Namespace, out: Output) -> ExitCode:
    require_yes(args, f"erases conversation {args.conversation_id!r} and all its messages")
    response = client.delete_conversation(
        args.username, args.graphname, conversation_id=args.conversation_id
    )
    if out.json:
        out.message_json(response)
        return ExitCode.OK
    deleted = plural(response.deleted_messages, "message")
    out.line(f"deleted conversation {args.conversation_id} ({deleted})")
    return ExitCode.OK

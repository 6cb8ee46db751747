"""Commands for health, turns, context and conversation history. Each is its call (client and
parsed arguments in, response out) and, under `@command(call)`, the text it prints for people."""

from __future__ import annotations

from argparse import Namespace

from memory_client._health import HealthCheckResponse
from memory_client.cli._command import command
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


def _health(client: MemoryClient, args: Namespace) -> HealthCheckResponse:
    serving = client.health(args.service)
    response = HealthCheckResponse
    return response(status=response.SERVING if serving else response.NOT_SERVING)


def _serving(response: HealthCheckResponse) -> ExitCode:
    return ExitCode.OK if response.status == response.SERVING else ExitCode.FAILED


@command(_health, status=_serving)
def health(response: HealthCheckResponse, args: Namespace, out: Output) -> None:
    out.line(response.ServingStatus.Name(response.status))


def _context_figures(context: pb.MemoryContext) -> str:
    return (
        f"{context.total_tokens} of {context.budget_tokens} tokens "
        f"(summary {context.summary_tokens}, recent {context.recent_tokens}, "
        f"long-term {context.long_term.tokens}); "
        f"{plural(len(context.recent_messages), 'recent message')}, "
        f"{context.omitted_messages} omitted; "
        f"{plural(len(context.long_term.facts), 'fact')} and "
        f"{plural(len(context.long_term.episodes), 'episode')} recalled"
    )


def _context_notes(context: pb.MemoryContext) -> list[tuple[str, str]]:
    if context.long_term.degraded:
        return [("long-term", f"degraded: {context.long_term.degraded_reason}")]
    return []


def _start_turn(client: MemoryClient, args: Namespace) -> pb.StartTurnResponse:
    return client.start_turn(
        args.username,
        args.graphname,
        conversation_id=args.conversation_id,
        content=text_of(args.content),
        message_id=args.message_id,
        conversation_name=args.name,
    )


@command(_start_turn)
def start_turn(response: pb.StartTurnResponse, args: Namespace, out: Output) -> None:
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


def _complete_turn(client: MemoryClient, args: Namespace) -> pb.CompleteTurnResponse:
    return client.complete_turn(
        args.username,
        args.graphname,
        conversation_id=args.conversation_id,
        content=text_of(args.content),
        model=args.model,
        parent_id=args.parent_id,
        response_time_seconds=args.response_time,
        message_id=args.message_id,
    )


@command(_complete_turn)
def complete_turn(response: pb.CompleteTurnResponse, args: Namespace, out: Output) -> None:
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


def _get_context(client: MemoryClient, args: Namespace) -> pb.GetContextResponse:
    return client.get_context(
        args.username, args.graphname, conversation_id=args.conversation_id, question=args.question
    )


@command(_get_context)
def context(response: pb.GetContextResponse, args: Namespace, out: Output) -> None:
    out.block(response.context.rendered)
    out.line()
    notes = [("tokens", _context_figures(response.context)), *_context_notes(response.context)]
    if not response.conversation_exists:
        notes.append(("conversation", f"{args.conversation_id} does not exist yet"))
    out.fields(notes)


def _list_conversations(client: MemoryClient, args: Namespace) -> pb.ListConversationsResponse:
    return collect(
        lambda token: client.list_conversations(
            args.username, args.graphname, page_size=args.page_size, page_token=token
        ),
        args.page_token,
        "conversations",
        follow=args.all,
    )


@command(_list_conversations)
def conversations(response: pb.ListConversationsResponse, args: Namespace, out: Output) -> None:
    rows = [
        [c.conversation_id, c.name, str(c.message_count), timestamp(c.updated_at)]
        for c in response.conversations
    ]
    out.table(_CONVERSATION_COLUMNS, rows, empty="no conversations")
    out.next_page(response.next_page_token)


def _get_conversation(client: MemoryClient, args: Namespace) -> pb.GetConversationResponse:
    return collect(
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


@command(_get_conversation)
def conversation(response: pb.GetConversationResponse, args: Namespace, out: Output) -> None:
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


def _submit_feedback(client: MemoryClient, args: Namespace) -> pb.SubmitFeedbackResponse:
    return client.submit_feedback(
        args.username,
        args.graphname,
        message_id=args.message_id,
        feedback=FEEDBACK[args.feedback],
        comment=args.comment,
    )


@command(_submit_feedback)
def submit_feedback(response: pb.SubmitFeedbackResponse, args: Namespace, out: Output) -> None:
    message = response.message
    out.fields(
        [
            ("message", message.message_id),
            ("feedback", feedback(message.feedback)),
            ("comment", message.comment or "-"),
        ]
    )


def _rename_conversation(client: MemoryClient, args: Namespace) -> pb.RenameConversationResponse:
    return client.rename_conversation(
        args.username, args.graphname, conversation_id=args.conversation_id, name=args.new_name
    )


@command(_rename_conversation)
def rename(response: pb.RenameConversationResponse, args: Namespace, out: Output) -> None:
    renamed = response.conversation
    out.fields([("conversation", renamed.conversation_id), ("name", renamed.name)])


def _delete_conversation(client: MemoryClient, args: Namespace) -> pb.DeleteConversationResponse:
    require_yes(args, f"erases conversation {args.conversation_id!r} and all its messages")
    return client.delete_conversation(
        args.username, args.graphname, conversation_id=args.conversation_id
    )


@command(_delete_conversation)
def delete_conversation(
    response: pb.DeleteConversationResponse, args: Namespace, out: Output
) -> None:
    deleted = plural(response.deleted_messages, "message")
    out.line(f"deleted conversation {args.conversation_id} ({deleted})")


_EPISODE_COLUMNS = (
    Column("SCORE", right=True),
    Column("SAID"),
    Column("CONVERSATION"),
    Column("ROLE"),
    Column("MESSAGE", 60),
)


def _search_episodes(client: MemoryClient, args: Namespace) -> pb.SearchEpisodesResponse:
    return client.search_episodes(
        args.username,
        args.graphname,
        query=args.query,
        top_k=args.top_k,
        threshold=args.threshold,
        as_of_valid_time=args.as_of_valid,
        as_of_transaction_time=args.as_of_transaction,
    )


@command(_search_episodes)
def search_episodes(response: pb.SearchEpisodesResponse, args: Namespace, out: Output) -> None:
    rows = [
        [
            f"{r.score:.3f}",
            timestamp(r.message.created_at),
            r.message.conversation_id,
            role(r.message.role),
            r.message.content,
        ]
        for r in response.results
    ]
    out.table(_EPISODE_COLUMNS, rows, empty="no matching messages")

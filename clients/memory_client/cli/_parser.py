"""memoryctl's arguments: the global options, and one subcommand per client method.

Global options are accepted before the subcommand and after it. Every subcommand's parser gets
a copy of them whose default is SUPPRESS, so a value given after the subcommand overrides the
one given (or defaulted) before it, and an absent one leaves it alone."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from memory_client.cli import _conversations as conversations
from memory_client.cli import _facts as facts
from memory_client.cli._exit import epilog
from memory_client.client import SERVICE_NAME

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 10.0
TARGET_ENV = "MEMORYCTL_TARGET"
TOKEN_ENV = "MEMORYCTL_TOKEN"

_DESCRIPTION = """\
Command line for the graphrag-memory service (graphrag.memory.v1.MemoryService): one
subcommand per RPC. Prints aligned tables, or the response as JSON with --json. Global
options may come before or after the subcommand; `memoryctl COMMAND --help` for its options.
"""


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {text}")
    return value


def aware_datetime(text: str) -> datetime:
    """ISO-8601 with a timezone. A naive time is refused rather than read as local or UTC: the
    two differ by hours, and as-of answers would be silently wrong."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2025-01-31T12:00:00Z)"
        ) from None
    if value.utcoffset() is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no timezone; add Z or an offset such as +02:00"
        )
    return value


def _global_options(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if environ is None else value

    group = parser.add_argument_group("global options (before or after the subcommand)")
    group.add_argument(
        "--target",
        metavar="HOST:PORT",
        default=default((environ or {}).get(TARGET_ENV) or DEFAULT_TARGET),
        help=f"server address (default: ${TARGET_ENV}, else {DEFAULT_TARGET})",
    )
    group.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive_float,
        default=default(DEFAULT_TIMEOUT_S),
        help=f"deadline of the whole call, retries included (default: {DEFAULT_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--token",
        default=default((environ or {}).get(TOKEN_ENV)),
        help=f"bearer token (default: ${TOKEN_ENV}; the variable keeps it out of `ps`)",
    )
    group.add_argument("--tls", action="store_true", default=default(False), help="use TLS")
    group.add_argument(
        "--ca-file",
        metavar="PATH",
        default=default(None),
        help="PEM root certificates to trust (implies --tls)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print the response protobuf as JSON",
    )


def _scope(parser: argparse.ArgumentParser, *, conversation: bool = False) -> None:
    parser.add_argument("-u", "--user", dest="username", required=True, metavar="USERNAME")
    parser.add_argument("-g", "--graph", dest="graphname", required=True, metavar="GRAPHNAME")
    if conversation:
        parser.add_argument(
            "-c", "--conversation", dest="conversation_id", required=True, metavar="ID"
        )


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--page-size", type=_non_negative_int, default=0, help="0: the server's default"
    )
    parser.add_argument("--page-token", default="", help="from a previous page's 'more:' line")
    parser.add_argument("--all", action="store_true", help="follow page tokens to the end")


def _as_of(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as-of-valid",
        type=aware_datetime,
        metavar="TIME",
        help="what was true at TIME (ISO-8601 with timezone; default now)",
    )
    parser.add_argument(
        "--as-of-transaction",
        type=aware_datetime,
        metavar="TIME",
        help="as the service believed at TIME (ISO-8601 with timezone; default now)",
    )


def _yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="confirm the erasure (no undo)")


Add = Callable[[Any, str, Callable[..., Any] | None, str], argparse.ArgumentParser]


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="memoryctl",
        description=_DESCRIPTION,
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _global_options(root, environ)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, None)

    def add(
        subparsers: Any, name: str, run: Callable[..., Any] | None, summary: str
    ) -> argparse.ArgumentParser:
        """A command with the global options, running `run` (None: it has subcommands)."""
        parser: argparse.ArgumentParser = subparsers.add_parser(
            name, help=summary, description=summary, parents=[common]
        )
        if run is not None:
            parser.set_defaults(run=run)
        return parser

    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _turn_commands(sub, add)
    _conversation_commands(sub, add)
    facts_parser = add(sub, "facts", None, "long-term facts: search, list, get, history, edit")
    fact_commands = facts_parser.add_subparsers(
        dest="facts_command", required=True, metavar="FACTS_COMMAND"
    )
    _fact_commands(fact_commands, add)
    p = add(
        sub,
        "forget-scope",
        facts.forget_scope,
        "erase a user's facts on a graph, nothing kept (needs --yes)",
    )
    _scope(p)
    p.add_argument("--include-conversations", action="store_true", help="erase their chats too")
    _yes(p)
    return root


def _turn_commands(sub: Any, add: Add) -> None:
    p = add(
        sub,
        "health",
        conversations.health,
        "is the service SERVING? (exit 0 if so, 1 if it answers NOT_SERVING, 5 if unreachable)",
    )
    p.add_argument("--service", default=SERVICE_NAME, help='"" asks about the whole server')

    p = add(sub, "start-turn", conversations.start_turn, "store the user's message (StartTurn)")
    _scope(p, conversation=True)
    p.add_argument("content", help="the message, or - to read it from standard input")
    p.add_argument("--message-id", default="", help="client-chosen id (makes retries safe)")
    p.add_argument("--name", default="", help="name of a conversation this call creates")

    p = add(sub, "complete-turn", conversations.complete_turn, "store the reply (CompleteTurn)")
    _scope(p, conversation=True)
    p.add_argument("content", help="the reply, or - to read it from standard input")
    p.add_argument("--model", default="")
    p.add_argument("--parent-id", default="", help="usually the user message's id")
    p.add_argument("--response-time", type=_non_negative_float, default=0.0, metavar="SECONDS")
    p.add_argument("--message-id", default="", help="client-chosen id (makes retries safe)")

    p = add(sub, "context", conversations.context, "memory context for a question (GetContext)")
    _scope(p, conversation=True)
    p.add_argument("--question", default="", help="the question (long-term recall uses it)")

    p = add(
        sub,
        "episodes",
        conversations.search_episodes,
        "what was said across the user's conversations (SearchEpisodes)",
    )
    _scope(p)
    p.add_argument("query")
    p.add_argument("--top-k", type=_non_negative_int, default=0, help="0: the server's default")
    p.add_argument(
        "--threshold", type=float, default=None, help="minimum score (default: the server's)"
    )
    _as_of(p)


def _conversation_commands(sub: Any, add: Add) -> None:
    p = add(sub, "conversations", conversations.conversations, "list conversations, newest first")
    _scope(p)
    _paging(p)

    p = add(sub, "conversation", conversations.conversation, "messages of one conversation")
    _scope(p, conversation=True)
    _paging(p)

    p = add(sub, "feedback", conversations.submit_feedback, "rate a message (SubmitFeedback)")
    _scope(p)
    p.add_argument("--message-id", required=True)
    p.add_argument("feedback", choices=sorted(conversations.FEEDBACK))
    p.add_argument("--comment", default="")

    p = add(sub, "rename", conversations.rename, "rename a conversation")
    _scope(p, conversation=True)
    p.add_argument("new_name", metavar="NAME")

    p = add(
        sub,
        "delete-conversation",
        conversations.delete_conversation,
        "delete a conversation with its messages and summaries (needs --yes)",
    )
    _scope(p, conversation=True)
    _yes(p)


def _fact_commands(fact_commands: Any, add: Add) -> None:
    p = add(fact_commands, "search", facts.search, "hybrid search (SearchFacts)")
    _scope(p)
    p.add_argument("query")
    p.add_argument("--top-k", type=_non_negative_int, default=0, help="0: the server's default")
    p.add_argument(
        "--threshold", type=float, default=None, help="minimum score (default: the server's)"
    )
    _as_of(p)

    p = add(fact_commands, "list", facts.list_facts, "facts believed at the as-of point")
    _scope(p)
    _paging(p)
    _as_of(p)

    for name, run, summary in (
        ("history", facts.history, "every change to a fact, with provenance"),
        ("get", facts.get, "a fact's current version and every version"),
    ):
        p = add(fact_commands, name, run, summary)
        _scope(p)
        p.add_argument("fact_id", metavar="FACT_ID")

    p = add(fact_commands, "add", facts.add, "add a fact by hand")
    _scope(p)
    p.add_argument("text", help="the fact, or - to read it from standard input")
    p.add_argument("--kind", default="", help="preference|decision|goal|identity|other")
    p.add_argument(
        "--valid-time",
        type=aware_datetime,
        metavar="TIME",
        help="true since TIME (ISO-8601 with timezone; default now)",
    )
    p.add_argument(
        "--conversation-id",
        default="",
        metavar="ID",
        help="the conversation it was said in (provenance; recall brings in its neighbours)",
    )

    p = add(fact_commands, "update", facts.update, "supersede a fact with new text")
    _scope(p)
    p.add_argument("fact_id", metavar="FACT_ID")
    p.add_argument("text", help="the new text, or - to read it from standard input")
    p.add_argument("--kind", default="", help="new kind (default: keep it)")

    p = add(fact_commands, "delete", facts.delete, "retract a fact (its history stays)")
    _scope(p)
    p.add_argument("fact_id", metavar="FACT_ID")
    p.add_argument(
        "--ended",
        action="store_true",
        help="it stopped being true now (default: it was never true, a wrong extraction)",
    )

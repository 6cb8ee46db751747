"""Commands for long-term facts (`facts ...`) and `forget-scope`, shaped like those in
_conversations: a call, and the text it prints for people under `@command(call)`."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Sequence

from memory_client.cli._command import Command, command
from memory_client.cli._common import collect, require_yes, text_of
from memory_client.cli._output import Column, Output, timestamp
from memory_client.client import MemoryClient
from memory_client.v1 import memory_pb2 as pb

_SEARCH_COLUMNS = (
    Column("SCORE", right=True),
    Column("VECTOR", right=True),
    Column("LEXICAL", right=True),
    Column("FACT"),
    Column("KIND"),
    Column("TEXT", 60),
)
_LIST_COLUMNS = (
    Column("FACT"),
    Column("KIND"),
    Column("VALID FROM"),
    Column("RECORDED"),
    Column("TEXT", 60),
)
_VERSION_COLUMNS = (
    Column("VERSION"),
    Column("VALID FROM"),
    Column("VALID TO"),
    Column("RECORDED"),
    Column("SUPERSEDED"),
    Column("TEXT", 40),
)
_EVENT_COLUMNS = (
    Column("AT"),
    Column("EVENT"),
    Column("VERSION"),
    Column("EXTRACTOR", 16),
    Column("CONVERSATION", 24),
    Column("DETAIL", 50),
)
_LINK_COLUMNS = (
    Column("LINKED FACT"),
    Column("VERSION"),
    Column("SCORE", right=True),
    Column("SINCE"),
)


def _fact_fields(fact: pb.Fact) -> list[tuple[str, str]]:
    return [
        ("fact", fact.fact_id),
        ("version", fact.version_id),
        ("kind", fact.kind),
        ("text", fact.text),
        ("valid", f"{timestamp(fact.valid_from)} .. {timestamp(fact.valid_to)}"),
        ("recorded", f"{timestamp(fact.recorded_at)} .. {timestamp(fact.superseded_at)}"),
        *(
            [("refers to", f"{timestamp(fact.event_time)} ({fact.event_period})")]
            if fact.HasField("event_time")
            else []
        ),
    ]


def _score(value: float) -> str:
    return f"{value:.3f}"


def _search_facts(client: MemoryClient, args: Namespace) -> pb.SearchFactsResponse:
    return client.search_facts(
        args.username,
        args.graphname,
        query=args.query,
        top_k=args.top_k,
        threshold=args.threshold,
        as_of_valid_time=args.as_of_valid,
        as_of_transaction_time=args.as_of_transaction,
    )


@command(_search_facts)
def search(response: pb.SearchFactsResponse, args: Namespace, out: Output) -> None:
    rows = [
        [
            _score(r.score),
            _score(r.vector_score),
            _score(r.lexical_score),
            r.fact.fact_id,
            r.fact.kind,
            r.fact.text,
        ]
        for r in response.results
    ]
    out.table(_SEARCH_COLUMNS, rows, empty="no matching facts")


def _list_facts(client: MemoryClient, args: Namespace) -> pb.ListFactsResponse:
    return collect(
        lambda token: client.list_facts(
            args.username,
            args.graphname,
            page_size=args.page_size,
            page_token=token,
            as_of_valid_time=args.as_of_valid,
            as_of_transaction_time=args.as_of_transaction,
        ),
        args.page_token,
        "facts",
        follow=args.all,
    )


@command(_list_facts)
def list_facts(response: pb.ListFactsResponse, args: Namespace, out: Output) -> None:
    rows = [
        [f.fact_id, f.kind, timestamp(f.valid_from), timestamp(f.recorded_at), f.text]
        for f in response.facts
    ]
    out.table(_LIST_COLUMNS, rows, empty="no facts")
    out.next_page(response.next_page_token)


def _get_fact_history(client: MemoryClient, args: Namespace) -> pb.GetFactHistoryResponse:
    return client.get_fact_history(args.username, args.graphname, fact_id=args.fact_id)


@command(_get_fact_history)
def history(response: pb.GetFactHistoryResponse, args: Namespace, out: Output) -> None:
    rows = [
        [
            timestamp(e.at),
            e.event,
            e.version_id,
            e.extractor or "-",
            e.conversation_id or "-",
            e.detail,
        ]
        for e in response.events
    ]
    out.table(_EVENT_COLUMNS, rows, empty="no events")
    _links(response.links, out)


def _links(links: Sequence[pb.FactLink], out: Output) -> None:
    """The fact's live semantic links (GetFact, GetFactHistory)."""
    out.line()
    rows = [
        [link.fact_id, link.version_id, f"{link.score:.3f}", timestamp(link.recorded_at)]
        for link in links
    ]
    out.table(_LINK_COLUMNS, rows, empty="no live links")


def _get_fact(client: MemoryClient, args: Namespace) -> pb.GetFactResponse:
    return client.get_fact(args.username, args.graphname, fact_id=args.fact_id)


@command(_get_fact)
def get(response: pb.GetFactResponse, args: Namespace, out: Output) -> None:
    if response.HasField("current"):
        out.fields(_fact_fields(response.current))
    else:
        out.fields([("fact", args.fact_id), ("current", "none (deleted)")])
    out.line()
    out.table(_VERSION_COLUMNS, _version_rows(response.versions), empty="no versions")
    _links(response.links, out)


def _version_rows(versions: Sequence[pb.Fact]) -> list[list[str]]:
    return [
        [
            v.version_id,
            timestamp(v.valid_from),
            timestamp(v.valid_to),
            timestamp(v.recorded_at),
            timestamp(v.superseded_at),
            v.text,
        ]
        for v in versions
    ]


def _add_fact(client: MemoryClient, args: Namespace) -> pb.AddFactResponse:
    return client.add_fact(
        args.username,
        args.graphname,
        text=text_of(args.text),
        kind=args.kind,
        valid_time=args.valid_time,
        conversation_id=args.conversation_id,
    )


def _update_fact(client: MemoryClient, args: Namespace) -> pb.UpdateFactResponse:
    return client.update_fact(
        args.username, args.graphname, fact_id=args.fact_id, text=text_of(args.text), kind=args.kind
    )


def _written(
    response: pb.AddFactResponse | pb.UpdateFactResponse, args: Namespace, out: Output
) -> None:
    out.fields(_fact_fields(response.fact))


add = Command(_add_fact, _written)
update = Command(_update_fact, _written)


def _delete_fact(client: MemoryClient, args: Namespace) -> pb.DeleteFactResponse:
    return client.delete_fact(args.username, args.graphname, fact_id=args.fact_id, ended=args.ended)


@command(_delete_fact)
def delete(response: pb.DeleteFactResponse, args: Namespace, out: Output) -> None:
    if args.ended:
        out.line(f"deleted fact {args.fact_id}: true until now (history kept)")
    else:
        out.line(f"deleted fact {args.fact_id}: never true (history kept)")


def _forget_scope(client: MemoryClient, args: Namespace) -> pb.ForgetScopeResponse:
    erased = "facts and conversations" if args.include_conversations else "facts"
    require_yes(args, f"erases all {erased} of user {args.username!r} on {args.graphname!r}")
    return client.forget_scope(
        args.username, args.graphname, include_conversations=args.include_conversations
    )


@command(_forget_scope)
def forget_scope(response: pb.ForgetScopeResponse, args: Namespace, out: Output) -> None:
    out.fields(
        [
            ("facts", str(response.facts)),
            ("versions", str(response.versions)),
            ("messages", str(response.messages)),
        ]
    )

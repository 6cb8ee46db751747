"""The long-term memory entries of the clients' RPC table (memory_client.client): fact search,
listing, history, the manual fact operations, and episode search."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypedDict

from google.protobuf.timestamp_pb2 import Timestamp

from memory_client._retry import always, never
from memory_client._rpc import rpc
from memory_client.v1 import memory_pb2 as pb


def timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("times must be timezone-aware datetimes")
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


class _AsOf(TypedDict):
    as_of_valid_time: Timestamp | None
    as_of_transaction_time: Timestamp | None


def _as_of(valid_time: datetime | None, transaction_time: datetime | None) -> _AsOf:
    """The as-of point of a bitemporal read (SearchFacts, ListFacts); None means now."""
    return {
        "as_of_valid_time": timestamp(valid_time),
        "as_of_transaction_time": timestamp(transaction_time),
    }


class FactRpcs:
    """SearchFacts, ListFacts, GetFact, GetFactHistory, AddFact, AddFacts, UpdateFact,
    DeleteFact, ForgetScope and SearchEpisodes, as `@rpc` entries (memory_client._rpc)."""

    @rpc("SearchEpisodes", pb.SearchEpisodesResponse, retry_if=always)
    def search_episodes(
        self,
        username: str,
        graphname: str,
        query: str,
        *,
        top_k: int = 0,
        threshold: float | None = None,
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.SearchEpisodesRequest:
        """What was said (user and assistant messages) across the user's conversations on the
        graph, best first. `threshold` None means the server's default; as-of times must be
        timezone-aware."""
        request = pb.SearchEpisodesRequest(
            username=username,
            graphname=graphname,
            query=query,
            top_k=top_k,
            **_as_of(as_of_valid_time, as_of_transaction_time),
        )
        if threshold is not None:
            request.threshold = threshold
        return request

    @rpc("SearchFacts", pb.SearchFactsResponse, retry_if=always)
    def search_facts(
        self,
        username: str,
        graphname: str,
        query: str,
        *,
        top_k: int = 0,
        threshold: float | None = None,
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.SearchFactsRequest:
        """`threshold` None means the server's default; as-of times must be timezone-aware."""
        request = pb.SearchFactsRequest(
            username=username,
            graphname=graphname,
            query=query,
            top_k=top_k,
            **_as_of(as_of_valid_time, as_of_transaction_time),
        )
        if threshold is not None:
            request.threshold = threshold
        return request

    @rpc("ListFacts", pb.ListFactsResponse, retry_if=always)
    def list_facts(
        self,
        username: str,
        graphname: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.ListFactsRequest:
        return pb.ListFactsRequest(
            username=username,
            graphname=graphname,
            page_size=page_size,
            page_token=page_token,
            **_as_of(as_of_valid_time, as_of_transaction_time),
        )

    @rpc("GetFact", pb.GetFactResponse, retry_if=always)
    def get_fact(
        self, username: str, graphname: str, fact_id: str, *, timeout_s: float | None = None
    ) -> pb.GetFactRequest:
        return pb.GetFactRequest(username=username, graphname=graphname, fact_id=fact_id)

    @rpc("GetFactHistory", pb.GetFactHistoryResponse, retry_if=always)
    def get_fact_history(
        self, username: str, graphname: str, fact_id: str, *, timeout_s: float | None = None
    ) -> pb.GetFactHistoryRequest:
        return pb.GetFactHistoryRequest(username=username, graphname=graphname, fact_id=fact_id)

    @rpc("AddFact", pb.AddFactResponse, retry_if=never)
    def add_fact(
        self,
        username: str,
        graphname: str,
        text: str,
        *,
        kind: str = "",
        valid_time: datetime | None = None,
        conversation_id: str = "",
        timeout_s: float | None = None,
    ) -> pb.AddFactRequest:
        """`valid_time`: when the fact became true (timezone-aware); None means now.
        `conversation_id`: the conversation it was said in (provenance), if any."""
        return pb.AddFactRequest(
            username=username,
            graphname=graphname,
            text=text,
            kind=kind,
            valid_time=timestamp(valid_time),
            conversation_id=conversation_id,
        )

    @rpc("AddFacts", pb.AddFactsResponse, retry_if=never)
    def add_facts(
        self,
        username: str,
        graphname: str,
        facts: Sequence[pb.NewFact],
        *,
        timeout_s: float | None = None,
    ) -> pb.AddFactsRequest:
        """Up to 1000 facts in one transaction (all or none), each as `add_fact` stores it;
        the answer has one `AddedFact` per fact, in order. Not retried on its own: a retry
        after an unknown outcome is safe (a text already live is not stored twice) but then
        reads `added=false` for what the lost attempt stored."""
        return pb.AddFactsRequest(username=username, graphname=graphname, facts=facts)

    @rpc("UpdateFact", pb.UpdateFactResponse, retry_if=never)
    def update_fact(
        self,
        username: str,
        graphname: str,
        fact_id: str,
        text: str,
        *,
        kind: str = "",
        timeout_s: float | None = None,
    ) -> pb.UpdateFactRequest:
        return pb.UpdateFactRequest(
            username=username, graphname=graphname, fact_id=fact_id, text=text, kind=kind
        )

    @rpc("DeleteFact", pb.DeleteFactResponse, retry_if=never)
    def delete_fact(
        self,
        username: str,
        graphname: str,
        fact_id: str,
        *,
        ended: bool = False,
        timeout_s: float | None = None,
    ) -> pb.DeleteFactRequest:
        return pb.DeleteFactRequest(
            username=username, graphname=graphname, fact_id=fact_id, ended=ended
        )

    @rpc("ForgetScope", pb.ForgetScopeResponse, retry_if=never)
    def forget_scope(
        self,
        username: str,
        graphname: str,
        *,
        include_conversations: bool = False,
        timeout_s: float | None = None,
    ) -> pb.ForgetScopeRequest:
        return pb.ForgetScopeRequest(
            username=username, graphname=graphname, include_conversations=include_conversations
        )

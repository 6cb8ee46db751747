"""The gRPC edge, long-term memory: the fact RPCs (search, list, history, the manual changes,
erasure) and episode search. Part of MemoryServicer (api.servicer), which holds what they use."""

from __future__ import annotations

from memory_client.v1 import memory_pb2 as pb
from memory_server.api import convert as c
from memory_server.api import validation as v
from memory_server.api.call import NO_LONG_TERM, Call, enabled, rpc, time_field
from memory_server.api.secret_fields import refuse_secret
from memory_server.memory.errors import InvalidArgument
from memory_server.memory.facts.admin import FactAdmin
from memory_server.memory.facts.model import Decision, FactKind, NewFact
from memory_server.memory.ports import AsOf, SecretFilter
from memory_server.memory.recall.episodes import EpisodeRecall
from memory_server.memory.recall.search import Recall
from memory_server.settings import Settings

MAX_TOP_K = 100
MAX_FACT_CHARS = 2000
MAX_FACTS_PER_CALL = 1000  # AddFacts
LIST_FACTS_PAGE = (100, 1000)  # (default, maximum)


class LongTermRpcs:
    """MemoryServicer's long-term RPCs; `None` parts answer FAILED_PRECONDITION (memory or
    long-term memory off), and SearchEpisodes answers nothing with `episodes` off."""

    _settings: Settings
    _secrets: SecretFilter
    _enabled_recall: Recall | None
    _enabled_facts: FactAdmin | None
    _enabled_episodes: EpisodeRecall | None

    def _query(self, call: Call[pb.SearchFactsRequest] | Call[pb.SearchEpisodesRequest]) -> str:
        """A search's text as it may leave the service (embedded, maybe remotely; shown to the
        model with ltm_split_questions): secrets redacted, as a context question's are, unless
        messages are kept verbatim (`redact_secrets` off). Stored nowhere; ~10 µs a query."""
        query = call.content("query")
        return self._secrets.redact(query).text if self._settings.redact_secrets else query

    @property
    def _recall(self) -> Recall:
        return enabled(self._enabled_recall, NO_LONG_TERM)

    @property
    def _facts(self) -> FactAdmin:
        return enabled(self._enabled_facts, NO_LONG_TERM)

    @rpc
    async def SearchFacts(self, call: Call[pb.SearchFactsRequest]) -> pb.SearchFactsResponse:
        query = self._query(call)
        top_k, threshold = _top_k_threshold(call, self._settings.ltm_score_threshold)
        found = await self._recall.search(
            call.scope,
            query,
            top_k=top_k or self._settings.ltm_top_k,
            threshold=threshold,
            as_of=_as_of(call),
            timeout_s=call.budget_s,
        )
        return pb.SearchFactsResponse(
            results=[
                pb.ScoredFact(
                    fact=c.fact_pb(s.version),
                    score=s.score,
                    vector_score=s.vector_score,
                    lexical_score=s.lexical_score,
                )
                for s in found
            ]
        )

    @rpc
    async def ListFacts(self, call: Call[pb.ListFactsRequest]) -> pb.ListFactsResponse:
        size = call.page_size(LIST_FACTS_PAGE)
        offset = c.decode_offset(call.request.page_token)
        facts = await self._facts.list_facts(
            call.scope, _as_of(call), size + 1, offset, call.budget_s
        )
        token = c.encode_offset(offset + size) if len(facts) > size else ""
        return pb.ListFactsResponse(
            facts=[c.fact_pb(f) for f in facts[:size]], next_page_token=token
        )

    @rpc
    async def GetFact(self, call: Call[pb.GetFactRequest]) -> pb.GetFactResponse:
        versions = await self._facts.get_fact(call.scope, call.id("fact_id"), call.budget_s)
        links = await self._facts.live_links(call.scope, versions, call.budget_s)
        response = pb.GetFactResponse(
            versions=[c.fact_pb(f) for f in versions], links=[c.fact_link_pb(k) for k in links]
        )
        if (current := c.current_version(versions)) is not None:
            response.current.CopyFrom(c.fact_pb(current))
        return response

    @rpc
    async def GetFactHistory(
        self, call: Call[pb.GetFactHistoryRequest]
    ) -> pb.GetFactHistoryResponse:
        fact_id = call.id("fact_id")
        events = await self._facts.history(call.scope, fact_id, call.budget_s)
        versions = await self._facts.get_fact(call.scope, fact_id, call.budget_s)
        links = await self._facts.live_links(call.scope, versions, call.budget_s)
        return pb.GetFactHistoryResponse(
            events=[c.fact_event_pb(e) for e in events], links=[c.fact_link_pb(k) for k in links]
        )

    @rpc
    async def AddFact(self, call: Call[pb.AddFactRequest]) -> pb.AddFactResponse:
        fact = self._new_fact("", call.request)
        change = await self._facts.add_fact(call.scope, fact, call.budget_s)
        return pb.AddFactResponse(fact=await self._fact_version(call, change.fact_id))

    @rpc
    async def AddFacts(self, call: Call[pb.AddFactsRequest]) -> pb.AddFactsResponse:
        given = call.request.facts
        v.items("facts", len(given), MAX_FACTS_PER_CALL, "facts")
        # Every one checked before any is written.
        facts = [self._new_fact(f"facts[{i}].", f) for i, f in enumerate(given)]
        changes = await self._facts.add_facts(call.scope, facts, call.budget_s)
        return pb.AddFactsResponse(
            facts=[
                pb.AddedFact(fact_id=ch.fact_id, added=ch.decision is not Decision.NONE)
                for ch in changes
            ]
        )

    def _new_fact(self, prefix: str, m: pb.AddFactRequest | pb.NewFact) -> NewFact:
        """The fact fields of an AddFactRequest or of an AddFacts item (named `prefix` +
        field in errors), validated."""
        text = v.content(f"{prefix}text", m.text, self._settings.max_message_bytes)
        text = v.short_text(f"{prefix}text", text.strip(), MAX_FACT_CHARS)
        return NewFact(
            refuse_secret(self._secrets, f"{prefix}text", text),
            c.fact_kind(m.kind, f"{prefix}kind") or FactKind.OTHER,
            time_field(f"{prefix}valid_time", m, "valid_time"),
            v.identifier(f"{prefix}conversation_id", m.conversation_id, required=False),
        )

    @rpc
    async def UpdateFact(self, call: Call[pb.UpdateFactRequest]) -> pb.UpdateFactResponse:
        fact_id = call.id("fact_id")
        text = v.short_text("text", call.content("text").strip(), MAX_FACT_CHARS)
        text = refuse_secret(self._secrets, "text", text)
        change = await self._facts.update_fact(
            call.scope, fact_id, text, c.fact_kind(call.request.kind), call.budget_s
        )
        return pb.UpdateFactResponse(fact=await self._fact_version(call, change.fact_id))

    @rpc
    async def DeleteFact(self, call: Call[pb.DeleteFactRequest]) -> pb.DeleteFactResponse:
        await self._facts.delete_fact(
            call.scope, call.id("fact_id"), ended=call.request.ended, timeout_s=call.budget_s
        )
        return pb.DeleteFactResponse()

    @rpc
    async def ForgetScope(self, call: Call[pb.ForgetScopeRequest]) -> pb.ForgetScopeResponse:
        counts = await self._facts.forget_scope(
            call.scope,
            include_messages=call.request.include_conversations,
            timeout_s=call.budget_s,
        )
        return pb.ForgetScopeResponse(
            facts=counts["facts"], versions=counts["versions"], messages=counts["messages"]
        )

    async def _fact_version(
        self, call: Call[pb.AddFactRequest] | Call[pb.UpdateFactRequest], fact_id: str
    ) -> pb.Fact:
        versions = await self._facts.get_fact(call.scope, fact_id, call.budget_s)
        return c.fact_pb(c.current_version(versions) or versions[-1])

    @rpc
    async def SearchEpisodes(
        self, call: Call[pb.SearchEpisodesRequest]
    ) -> pb.SearchEpisodesResponse:
        query = self._query(call)
        top_k, threshold = _top_k_threshold(call, self._settings.episode_score_threshold)
        self._recall  # noqa: B018 - FAILED_PRECONDITION without long-term memory
        if self._enabled_episodes is None:  # `episodes` off: nothing is kept to search
            return pb.SearchEpisodesResponse()
        found = await self._enabled_episodes.search(
            call.scope,
            query,
            top_k=top_k or self._settings.ltm_top_k,
            threshold=threshold,
            as_of=_as_of(call),
            fresh=True,
            timeout_s=call.budget_s,
        )
        return pb.SearchEpisodesResponse(
            results=[
                pb.ScoredEpisode(
                    message=c.message_pb(e.message),
                    score=e.score,
                    vector_score=e.vector_score,
                    lexical_score=e.lexical_score,
                )
                for e in found
            ]
        )


def _as_of(
    call: Call[pb.SearchFactsRequest] | Call[pb.ListFactsRequest] | Call[pb.SearchEpisodesRequest],
) -> AsOf:
    return AsOf(
        valid_time=call.time("as_of_valid_time"),
        transaction_time=call.time("as_of_transaction_time"),
    )


def _top_k_threshold(
    call: Call[pb.SearchFactsRequest] | Call[pb.SearchEpisodesRequest], default: float
) -> tuple[int, float]:
    """The request's top_k (0: the default) and threshold (unset: `default`), checked."""
    request = call.request
    if request.top_k < 0 or request.top_k > MAX_TOP_K:
        raise InvalidArgument("top_k", f"must be between 0 and {MAX_TOP_K}")
    threshold = default
    if request.HasField("threshold"):
        threshold = request.threshold
        if not 0.0 <= threshold <= 1.0:
            raise InvalidArgument("threshold", "must be between 0 and 1")
    return request.top_k, threshold

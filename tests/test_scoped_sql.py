"""Every statement the server sends stays within one scope, so every table can be distributed
by scope (README "Scale-out"): PostgreSQL logs what a server on a fresh database sends while it
serves every RPC, learns, indexes, links and forgets, and each statement that reads or writes
a table holding scopes' rows names its scope (by username and graphname, its id, its hash or
one of its conversations), or is one of the few that cross scopes on purpose (CROSSING, each
with its reason). Real server, real PostgreSQL, the embedded pgvector index."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb

from conftest import ServerFactory, new_id, outbox_caught_up

# The tables that hold scopes' rows.
SCOPED_TABLES = (
    "scopes",
    "conversations",
    "messages",
    "conversation_summaries",
    "facts",
    "fact_versions",
    "fact_history",
    "fact_links",
    "vector_outbox",
    "memory_vectors",
    "scope_lexicon",
    "scope_lexemes",
)
# One scope, named by a parameter: its (username, graphname), its id or its hash, one of its
# conversations, a one-row insert that carries it, or a function of the schema that takes the
# scope's hash and locks it first.
ONE_SCOPE = re.compile(
    r"(?:\w+\.)?username\s*=\s*\$\d+\s+AND\s+(?:\w+\.)?graphname\s*=\s*\$\d+"
    r"|(?:\w+\.)?scope_(?:id|hash)\s*=\s*\$\d+"
    r"|^DELETE FROM scopes WHERE id = \$1$"
    r"|conversation_pk\s*=\s*\$\d+"
    r"|^INSERT INTO \w+ \([^)]*\bscope_(?:id|hash)\b[^)]*\) VALUES \((?!.*\bSELECT\b).*\)$"
    r"|memory_(?:append_message|lock_scope)\s*\(",
    re.IGNORECASE,
)
# Schema changes (migrations, the vector table made on first use) apply to every scope.
SCHEMA = re.compile(r"^(?:--.*?)?\s*(?:CREATE|ALTER|DROP|COMMENT)\b", re.IGNORECASE | re.DOTALL)
# Statements that cross scopes on purpose, all of them work in the background: a fragment of
# each, and why. Under Citus each is a multi-shard statement.
CROSSING = {
    "FOR UPDATE SKIP LOCKED": "outbox: claims due rows of any scope, a batch of embeddings "
    "across scopes",
    "DELETE FROM vector_outbox WHERE id = ANY": "outbox: removes the batch it applied",
    "FROM fact_versions v JOIN scopes s ON s.id = v.scope_id WHERE v.id = ANY": "outbox: "
    "reads the batch's versions, each with its scope",
    "FROM messages m JOIN scopes s ON s.id = m.scope_id WHERE m.seq = ANY": "outbox: reads "
    "the batch's episodes, each with its scope",
    "INSERT INTO memory_vectors AS t": "outbox: writes the batch's vectors, each with its scope",
    "DELETE FROM memory_vectors WHERE version_id = ANY": "outbox: deletes the batch's vectors",
    "WITH closed AS ( SELECT id, superseded_at FROM fact_versions WHERE id = ANY": "outbox: "
    "closes the links of the batch's closed versions",
    "to_regclass('memory_vectors')": "catalog: which index the vector table has (no rows)",
    "SELECT count(*) AS waiting": "metrics: the outbox's depth and age over every scope",
    "SELECT DISTINCT s.username, s.graphname FROM facts f": "retention: finds the scopes "
    "holding facts past retention, then expires each under its own lock",
    "WITH old AS ( SELECT seq FROM messages WHERE recallable AND created_at": "retention: "
    "messages past retention stop being episodes, in batches across scopes",
    "= 'EXPIRE' AND (SELECT max(h.at)": "retention: finds expired facts past their grace "
    "period, to erase them",
    "ORDER BY f.id FOR UPDATE OF f) UPDATE facts f SET recall_count": "recall counter: one "
    "flush a second of the facts recalled in every scope, by id",
    "WHERE s.graphname = $1 AND m.seq > $2": "admin export: every user's messages on a graph "
    "(ListFeedback; the caller decides who may see it)",
}
_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ \[\d+\] ", re.MULTILINE)
_STATEMENT = re.compile(r"^(?:LOG|LOG:)?\s*(?:statement|execute [^:]*): (.*)\Z", re.DOTALL)


def statements(log: str) -> list[str]:
    """The statements of `log` (PostgreSQL's stderr log with log_statement = all)."""
    out = []
    entries = list(_ENTRY.finditer(log))
    ends = [m.start() for m in entries[1:]] + [len(log)]
    for entry, end in zip(entries, ends, strict=True):
        body = log[entry.end() : end].strip()
        match = _STATEMENT.match(body)
        if match:
            out.append(" ".join(match.group(1).split()))
    return out


def touches(sql: str) -> list[str]:
    return [t for t in SCOPED_TABLES if re.search(rf"\b{t}\b", sql, re.IGNORECASE)]


@pytest.fixture
async def logged_database(database_url: str, scratch_dir: Path) -> AsyncIterator[tuple[str, Path]]:
    """A fresh database whose every statement PostgreSQL logs, and the log."""
    name = f"scoped_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.execute(f"ALTER DATABASE \"{name}\" SET log_statement = 'all'")
    log = scratch_dir / "shared-db" / "pgdata" / "log"
    assert log.exists()
    try:
        yield database_url.replace("/graphrag_memory", f"/{name}", 1), log
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def test_every_statement_stays_within_one_scope(
    start_server: ServerFactory, logged_database: tuple[str, Path]
) -> None:
    url, log = logged_database
    offset = log.stat().st_size
    # A small context (the rolling summary folds turns) and cap (AddFacts evicts).
    memory = await start_server(database_url=url, stm_context_tokens=256, max_facts_per_scope=3)
    await _every_rpc(memory)
    sent = statements(log.read_bytes()[offset:].decode(errors="replace"))
    assert len(sent) > 100
    assert any("conversation_summaries" in sql and "INSERT" in sql for sql in sent)
    crossing: dict[str, str] = {}
    for sql in sent:
        if not touches(sql) or SCHEMA.match(sql) or ONE_SCOPE.search(sql):
            continue
        reason = next((why for part, why in CROSSING.items() if part in sql), None)
        crossing[sql] = reason or "UNEXPLAINED"
    unexplained = [sql for sql, why in crossing.items() if why == "UNEXPLAINED"]
    assert not unexplained, "\n\n".join(unexplained)
    # The list is what the server sends: each entry was seen (none is kept for nothing).
    unseen = [part for part in CROSSING if not any(part in sql for sql in crossing)]
    assert not unseen


async def _every_rpc(memory: object) -> None:
    stub = memory.stub  # type: ignore[attr-defined]
    scope = {"username": new_id("user"), "graphname": "Finance"}
    chat = new_id()
    turn = await stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=chat, content="I prefer tea over coffee.")
    )
    await stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope, conversation_id=chat, content="Noted.", parent_id=turn.message.message_id
        )
    )
    for i in range(6):  # past 256 tokens: older turns fold into the summary
        await stub.AppendMessages(
            pb.AppendMessagesRequest(
                **scope,
                conversation_id=chat,
                messages=[
                    pb.NewMessage(role=pb.ROLE_USER, content=f"Step {i}: " + "load the graph " * 12)
                ],
            )
        )
    added = await stub.AddFact(pb.AddFactRequest(**scope, text="Manager is Priya Raman"))
    await stub.AddFacts(
        pb.AddFactsRequest(
            **scope,
            facts=[
                pb.NewFact(text="Priya Raman wants to visit Kyoto"),
                pb.NewFact(text="Owns a kayak"),
                pb.NewFact(text="Plays the cello"),  # over the cap of 3: one is evicted
            ],
        )
    )
    await stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=new_id(),
            messages=[pb.NewMessage(role=pb.ROLE_USER, content="We moved the demo to Friday.")],
        )
    )
    await outbox_caught_up(memory)  # type: ignore[arg-type]
    listed = await stub.ListFacts(pb.ListFactsRequest(**scope))
    assert added.fact.fact_id not in [f.fact_id for f in listed.facts]  # evicted
    fact_id = listed.facts[0].fact_id
    await stub.GetContext(pb.GetContextRequest(**scope, conversation_id=chat, question="Kyoto?"))
    await stub.StartTurn(  # recalls facts: the recall counter's flush follows within a second
        pb.StartTurnRequest(**scope, conversation_id=chat, content="Where is Priya Raman going?")
    )
    await stub.SearchFacts(pb.SearchFactsRequest(**scope, query="where does my manager travel"))
    past = Timestamp()
    past.GetCurrentTime()
    await stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query="kayak", as_of_transaction_time=past)
    )
    await stub.SearchEpisodes(pb.SearchEpisodesRequest(**scope, query="demo"))
    await stub.ListFacts(pb.ListFactsRequest(**scope))
    await stub.GetFact(pb.GetFactRequest(**scope, fact_id=fact_id))
    await stub.GetFactHistory(pb.GetFactHistoryRequest(**scope, fact_id=fact_id))
    await stub.UpdateFact(
        pb.UpdateFactRequest(**scope, fact_id=fact_id, text="Manager is Ana Ruiz")
    )
    await stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=fact_id, ended=True))
    await stub.ListConversations(pb.ListConversationsRequest(**scope))
    await stub.GetConversation(pb.GetConversationRequest(**scope, conversation_id=chat))
    await stub.SubmitFeedback(
        pb.SubmitFeedbackRequest(
            **scope, message_id=turn.message.message_id, feedback=pb.FEEDBACK_UP
        )
    )
    await stub.RenameConversation(
        pb.RenameConversationRequest(**scope, conversation_id=chat, name="Tea")
    )
    await stub.ListFeedback(pb.ListFeedbackRequest(graphname="Finance"))
    await stub.DeleteConversation(pb.DeleteConversationRequest(**scope, conversation_id=chat))
    await outbox_caught_up(memory)  # type: ignore[arg-type]
    await asyncio.sleep(1.5)  # the recall counter's flush (every second)
    await stub.ForgetScope(pb.ForgetScopeRequest(**scope, include_conversations=True))
    await outbox_caught_up(memory)  # type: ignore[arg-type]

"""Opt-in: GraphRAG's OWN chat path (tigergraph/graphrag at cc4eed1, its FastAPI app under
uvicorn from its own pinned environment) against loopback stand-ins: TigerGraph (one graph
holding GraphRAG's data and the memory server's vector index), an OpenAI-compatible LLM and,
for the stock run, chat-history (issue 27 item 5; tests/graphrag_run/).

Runs only when MEMORY_GRAPHRAG_SRC names a checkout of GraphRAG at cc4eed1 (see
graphrag_run/venv.py for the commit check). GraphRAG's environment is built once per
requirements file under MEMORY_GRAPHRAG_VENV (default /tmp/graphrag-memory-graphrag-venv),
in the background from the first moment; a first build takes minutes.

- `test_stock_graphrag_walks_every_branch`: GraphRAG unchanged, proving the harness reaches
  each answer branch, and showing what memory has to fix (memory types listed to the LLM,
  history lost on reconnect).
- `test_graphrag_with_memory`: the same run after `graphrag-memory-integrate` (the client's
  console script, from GraphRAG's environment) edited a copy of the checkout, checking that
  memory reaches the answer prompt, that no memory type reaches the prompts that list the
  schema, feedback, the rolling summary on turn 3, and that a second user sees nothing of the
  first.

The memory server runs in-process with `vector_index: tigergraph` on the stand-in and
`stm_context_tokens: 256` (the smallest allowed) so the rolling summary forms within three
turns. Each run prints a report (branches, turns, timings, GraphRAG's TigerGraph calls, every
check); run with `-s` to see it when passing. The run folder (GraphRAG's logs, every prompt in
turns.json) is kept after a failure, or always with MEMORY_GRAPHRAG_KEEP=1.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memory_client.graphrag.prompts import SUMMARY_QUERY
from memory_client.schema_names import MEMORY_EDGES, MEMORY_VERTEX
from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory
from graphrag_run import harness, report, venv
from graphrag_run.chat_history import serve_chat_history
from graphrag_run.fake_llm import serve_graphrag_llm
from graphrag_run.graph_data import GRAPH
from graphrag_run.harness import ALICE_MARKERS, Run
from graphrag_run.tg_graphrag import serve_graphrag_tigergraph
from graphrag_run.ui import Answer, Chat
from tg_index import server_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

BUILD_TIMEOUT_S = 3000
MEMORY_HEADER = "Memory context"


@dataclass
class GraphRAGEnv:
    src: Path
    build: venv.VenvBuild
    notes: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _ready: bool = False

    async def ready(self) -> None:
        """Waits for GraphRAG's environment, then puts our client in, once per session."""
        if self._ready:
            return
        start = time.monotonic()
        await asyncio.to_thread(self.build.wait, BUILD_TIMEOUT_S)
        self.timings["GraphRAG environment ready (s)"] = time.monotonic() - start
        start = time.monotonic()
        self.notes["client"] = await asyncio.to_thread(venv.install_client, self.build)
        self.timings["our client installed (s)"] = time.monotonic() - start
        changed = await asyncio.to_thread(venv.changed_pins, self.src, self.build.python)
        if changed:
            (self.build.root / ".ready").unlink(missing_ok=True)  # rebuild next time
        assert not changed, f"installing our client changed GraphRAG's pins: {changed}"
        self.notes["GraphRAG pins"] = f"{len(venv.pins(self.src))} exact pins unchanged"
        self._ready = True


@pytest.fixture(scope="session")
def graphrag_env() -> Iterator[GraphRAGEnv]:
    raw = os.environ.get(venv.SRC_ENV)
    if not raw:
        pytest.skip(f"{venv.SRC_ENV} is not set (a tigergraph/graphrag checkout at cc4eed1)")
    src = Path(raw).resolve()
    problem = venv.source_problem(src)
    if problem:
        pytest.skip(problem)
    build = venv.start_build(src)  # in the background: the first build takes minutes
    env = GraphRAGEnv(src, build, notes={"GraphRAG": f"{src} at {venv.GRAPHRAG_COMMIT[:7]}"})
    env.notes["environment"] = f"{build.root} (log {build.log})"
    try:
        yield env
    finally:
        build.stop()


@contextmanager
def run_dir() -> Iterator[Path]:
    """The run's folder (code copies, configs, GraphRAG's logs, turns.json): removed after a
    passing run unless MEMORY_GRAPHRAG_KEEP is set, kept after a failing one."""
    path = Path(tempfile.mkdtemp(prefix="graphrag-run-", dir="/tmp"))
    yield path
    if not os.environ.get("MEMORY_GRAPHRAG_KEEP"):
        shutil.rmtree(path, ignore_errors=True)


@asynccontextmanager
async def graphrag_run(
    mode: str, env: GraphRAGEnv, start_server: ServerFactory
) -> AsyncIterator[tuple[Run, RunningServer]]:
    """Stand-ins, the memory server (its index in the stand-in's graph) and GraphRAG's apps;
    prints the run report when done, passed or not."""
    with run_dir() as where, serve_graphrag_tigergraph() as tg, serve_graphrag_llm() as llm:
        run = Run(mode, tg, llm)
        run.notes["run folder"] = str(where)
        memory = await start_server(**server_settings(tg), stm_context_tokens=256)
        async with AsyncExitStack() as stack:
            stack.callback(harness.stop_apps, run)
            chat_history = None
            if mode == "stock":
                chat_history = stack.enter_context(serve_chat_history())
            try:
                await env.ready()
                run.notes, run.timings = env.notes | run.notes, env.timings | run.timings
                code = harness.prepare_code(mode, env.src, env.build, where, run)
                address = memory.address if mode == "memory" else None
                await harness.start_apps(
                    run,
                    env.build,
                    code,
                    where,
                    chat_history=chat_history,
                    memory_address=address,
                )
                yield run, memory
            finally:
                harness.dump(run, where / "turns.json")
                print("\n" + report.render(run, f"GraphRAG {venv.GRAPHRAG_COMMIT[:7]}"))
                for app in run.apps.values():
                    if run.failures:
                        print(f"--- {app.name} log tail ---\n{app.log_tail(3000)}")


def _check_http_query(run: Run) -> str | None:
    """GraphRAG's HTTP chat route answered (its body is the reply Message as a JSON string);
    the answer prompt of that turn, if there was one."""
    answer = run.http["http query"]
    body = answer.body
    reply = json.loads(body) if isinstance(body, str) and body.startswith("{") else {}
    ok = answer.status == 200 and reply.get("response_type") == "supportai"
    run.check(ok, "GET /ui/{graph}/query: answered", answer)
    prompts = [p for p in run.http_query_prompts if p.kind == "answer"]
    return prompts[-1].text if prompts else None


def _conversation(prompt_text: str) -> str:
    """The schema-mapping prompt's `conversation:` value (the prompt's last field)."""
    return prompt_text.rsplit("\nconversation:", 1)[-1].strip()


def _memory_part(prompt_text: str) -> str:
    return prompt_text.partition(MEMORY_HEADER)[2]


def _names_memory_type(text: str, names: set[str]) -> list[str]:
    return sorted(n for n in names if re.search(rf"\b{re.escape(n)}\b", text))


def _ids(answer: Answer) -> set[str]:
    body = answer.body if isinstance(answer.body, list) else []
    return {str(c.get("conversation_id")) for c in body if isinstance(c, dict)}


def _check_history_routes(run: Run) -> None:
    """The UI's history routes as driven by harness.drive: thumbs up on turn 1's reply through
    the stock paths, thumbs down on turn 2's through the graph-scoped ones (where served)."""
    first = run.chats["supportai"]
    alice_ids = {c.conversation_id for c in run.chats.values()}
    for key, turn, value in (("", 0, 1), ("scoped ", 1, 2)):
        if key + "feedback" not in run.http:
            continue
        posted, shown = run.http[key + "feedback"], run.http[key + "conversation"]
        run.check(posted.status == 200, f"{posted.route.split()[1]}: 200", posted)
        rows = shown.body if isinstance(shown.body, list) else []
        message_id = first.turns[turn].reply["message_id"]
        rated = [m for m in rows if m.get("message_id") == message_id]
        seen = bool(rated) and rated[0].get("feedback") == value
        run.check(seen, f"{key}conversation route shows the feedback on message_id", rows)
        listed = run.http[key + "conversations"]
        ok = listed.status == 200 and first.conversation_id in _ids(listed)
        run.check(ok, f"{key}conversation list route lists it", listed)
        bobs = run.http[key + "bob conversations"]
        ok = bobs.status == 200 and not _ids(bobs) & alice_ids
        run.check(ok, f"{key}bob lists none of alice's conversations", bobs)
        peek = run.http[key + "bob reads alice's conversation"]
        hidden = peek.status in (403, 404) or (peek.status == 200 and peek.body == [])
        run.check(hidden, f"{key}bob cannot read alice's conversation", peek)
        export = run.http[key + "feedback export"]
        rows = export.body if isinstance(export.body, list) else []
        rated = [m for m in rows if m.get("message_id") == message_id]
        seen = export.status == 200 and bool(rated) and rated[0].get("feedback") == value
        run.check(seen, f"{key}feedback export has the rating", export)
        bobs_export = run.http[key + "bob's feedback export"]
        rows = bobs_export.body if isinstance(bobs_export.body, list) else []
        ok = bobs_export.status == 200 and not _ids(bobs_export) & alice_ids
        run.check(ok, f"{key}bob's feedback export has nothing of alice", bobs_export)


async def test_stock_graphrag_walks_every_branch(
    graphrag_env: GraphRAGEnv, start_server: ServerFactory
) -> None:
    async with graphrag_run("stock", graphrag_env, start_server) as (run, _):
        await harness.drive(run)
        chats = run.chats
        for turn in chats["supportai"].turns:
            run.check(turn.reply.get("response_type") == "supportai", "supportai: answered")
            run.check(bool(turn.prompts_of("answer")), "supportai: answer prompt per turn")
        for turn in chats["cypher"].turns:
            run.check(turn.reply.get("response_type") == "cypher", "cypher: answered", turn.reply)
            run.check(bool(turn.prompts_of("cypher")), "cypher: OpenCypher prompt per turn")
            run.check(bool(turn.prompts_of("answer")), "cypher: answer prompt per turn")
        calls = run.tg.world.calls_by("graphrag")
        run.check("GSQL INTERPRET OPENCYPHER QUERY" in calls, "cypher: query ran on TigerGraph")
        for turn in chats["inquiryai"].turns:
            run.check(bool(turn.prompts_of("map_schema")), "inquiryai: schema mapping per turn")
            # GraphRAG cc4eed1's GenerateFunction always fails: retries, then the apology.
            run.check(
                turn.reply.get("response_type") == "error" and not turn.prompts_of("answer"),
                "inquiryai: function path fails at cc4eed1 (apology, no answer prompt)",
                turn.reply,
            )

        memory_types = run.tg.memory_type_names()
        run.check(MEMORY_VERTEX in memory_types, "the memory index is in GraphRAG's graph")
        mapping = chats["inquiryai"].turns[0].prompts_of("map_schema")[0].text
        leaked = _names_memory_type(mapping, memory_types)
        run.check(bool(leaked), f"stock lists memory types to schema mapping: {leaked}")
        kinds = {
            p.kind
            for c in chats.values()
            for t in c.turns
            for p in t.prompts
            if _names_memory_type(p.text, memory_types)
        }
        run.notes["stock prompts listing memory types"] = ", ".join(sorted(kinds))
        second = chats["inquiryai"].turns[1].prompts_of("map_schema")[0].text
        run.check(ALICE_MARKERS[0] in _conversation(second), "stock: in-session history kept")
        assert run.reconnect is not None
        again = run.reconnect.turns[0].prompts_of("map_schema")[0].text
        run.check(
            _conversation(again) == "[]",
            "stock: history lost on reconnect (chat-history answers a list, ui.py reads .get)",
            _conversation(again),
        )
        for chat in chats.values():
            for turn in chat.turns:
                for p in turn.prompts_of("answer"):
                    run.check(MEMORY_HEADER not in p.text, "stock: no memory in answer prompts")
        asked = _check_http_query(run)
        run.check(asked is not None and MEMORY_HEADER not in asked, "stock: HTTP query answered")

        _check_history_routes(run)
        run.verdict()


async def _summary_formed(memory: RunningServer, chat: Chat, timeout_s: float = 10) -> bool:
    """Before a third turn: whether the conversation's rolling summary exists (it forms
    asynchronously, once the exact turns outgrow stm_context_tokens), waiting a little."""
    request = pb.GetContextRequest(
        username=chat.user, graphname=GRAPH, conversation_id=chat.conversation_id
    )
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await memory.stub.GetContext(request)
        if reply.context.summary:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)


async def test_graphrag_with_memory(graphrag_env: GraphRAGEnv, start_server: ServerFactory) -> None:
    async with graphrag_run("memory", graphrag_env, start_server) as (run, memory):
        summarized: set[str] = set()  # conversations with a summary before their third turn

        async def before_turn(i: int, chat: Chat) -> None:
            if i == 2 and await _summary_formed(memory, chat):
                summarized.add(chat.conversation_id)

        await harness.drive(run, before_turn)
        chats = run.chats
        memory_types = run.tg.memory_type_names() | {MEMORY_VERTEX, *MEMORY_EDGES}
        run.check(MEMORY_VERTEX in run.tg.memory_type_names(), "memory index in GraphRAG's graph")

        # (1) the memory block reaches the answer prompt, holding turn 1 on turns 2-3
        for name, chat in chats.items():
            answers = [t.prompts_of("answer") for t in chat.turns]
            if name == "inquiryai" and not any(answers):
                run.notes["inquiryai"] = "no answer prompt (GenerateFunction fails at cc4eed1)"
                for turn in chat.turns[1:]:
                    conv = _conversation(turn.prompts_of("map_schema")[0].text)
                    held = any(m in conv for m in ALICE_MARKERS)
                    run.check(held, "inquiryai: turn 1 in the schema-mapping conversation", conv)
                continue
            for i, (turn, prompts) in enumerate(zip(chat.turns, answers, strict=True)):
                run.check(bool(prompts), f"{name}: answer prompt", turn.reply)
                text = prompts[-1].text
                if not i:
                    # A first turn gets memory only when something is remembered (facts from
                    # an earlier conversation); an empty memory heading is left out.
                    run.notes[f"{name}: memory on turn 1"] = str(MEMORY_HEADER in text)
                    continue
                run.check(MEMORY_HEADER in text, f"{name}: memory block in the answer prompt")
                if i:
                    held = any(m in _memory_part(text) for m in ALICE_MARKERS)
                    run.check(held, f"{name}: memory holds turn 1 on turns 2-3", _memory_part(text))

        asked = _check_http_query(run) or ""
        held = MEMORY_HEADER in asked and any(m in _memory_part(asked) for m in ALICE_MARKERS)
        run.check(held, "HTTP query: memory in its answer prompt", _memory_part(asked))

        # (2) no memory type in what GraphRAG lists to the LLM
        assert run.reconnect is not None
        for name, listed in [*chats.items(), ("reconnect", run.reconnect)]:
            for turn in listed.turns:
                for kind in ("map_schema", "route", "cypher"):
                    for p in turn.prompts_of(kind):
                        leaked = _names_memory_type(p.text, memory_types)
                        run.check(not leaked, f"{name}: no memory type in {kind} prompts", leaked)

        # (3) feedback on the reply's message_id, shown by the conversation route; (5) bob's
        # view of the history routes
        _check_history_routes(run)

        # (4) the rolling summary in the schema-mapping conversation on turn 3. It forms once
        # two turns outgrow the STM budget: on the cypher branch (GraphRAG's answers are long);
        # inquiryai's replies are one-line apologies, so its first turns may still fit.
        for name in ("inquiryai", "cypher"):
            formed = chats[name].conversation_id in summarized
            run.notes[f"summary before turn 3 ({name})"] = "formed" if formed else "not formed"
            if name == "cypher" or formed:
                run.check(formed, f"{name}: the rolling summary formed within three turns")
                third = _conversation(chats[name].turns[2].prompts_of("map_schema")[0].text)
                run.check(SUMMARY_QUERY in third, f"{name}: summary item on turn 3", third)
        assert run.reconnect is not None
        again = _conversation(run.reconnect.turns[0].prompts_of("map_schema")[0].text)
        held = any(m in again for m in ALICE_MARKERS)
        run.check(held, "reconnect: history comes back from memory", again)

        # The integration must leave GraphRAG's own API description working.
        main = run.apps["main"]
        run.check(
            main.openapi_error is None,
            "GraphRAG's /openapi.json still answers",
            f"{main.openapi_error}; the traceback is in {main.log}",
        )

        # (5) a second user on the same graph gets nothing of the first
        assert run.bob is not None
        for p in run.bob.turns[0].prompts:
            found = [m for m in ALICE_MARKERS if m in p.text]
            run.check(not found, f"bob: no memory of alice in his {p.kind} prompt", found)
        run.verdict()

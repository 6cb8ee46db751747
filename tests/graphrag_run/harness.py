"""One run of GraphRAG's own chat path against the stand-ins: a three-turn conversation per
answer branch, a reconnect to an existing conversation, a second user, and the UI's history
routes, with everything GraphRAG asked the LLM and TigerGraph recorded.

Branches, as GraphRAG cc4eed1's agent graph (graphrag/app/agent/agent_graph.py) takes them:

- `supportai`: the router prompt answers "vectorstore"; the "hybridsearch" pattern runs
  GraphRAG_Hybrid_Vector_Search, then the answer prompt (chatbot_response).
- `inquiryai`: the router answers "functions": schema mapping, then GenerateFunction. At
  cc4eed1 that tool cannot succeed: it asks `embedding_store.list_registered_documents()`,
  whose every branch evaluates an undefined `PASS` (NameError); past that it would call
  `chain.invoke(**inputs)` (a TypeError) with no valid function to accept. So the agent
  rewrites the question and retries until it apologizes: no answer prompt on this branch.
- `cypher` (USE_CYPHER=true, its own app): the same start, and the failed function call falls
  through to GenerateCypher, `INTERPRET OPENCYPHER QUERY`, then the answer prompt.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .app import GraphRAGApp, apply_integration, build_code_dir, server_config, start_app
from .chat_history import ChatHistory
from .fake_llm import GraphRAGLLM, Prompt
from .graph_data import GRAPH, PASSWORDS
from .tg_graphrag import GraphRAGTigerGraph
from .ui import Answer, BeforeTurn, Chat, HistoryRoutes, chat
from .venv import VenvBuild

ALICE = ("alice", PASSWORDS["alice"])
BOB = ("bob", PASSWORDS["bob"])
QUESTIONS = [
    "My name is Alice Moreau and I look after the Zephyr-42 treasury project. "
    "What is the overdraft policy for accounts?",
    "Which approvals do wire transfers need for that project?",
    "Remind me which project I look after, and how are US dollar balances converted?",
]
RECONNECT_QUESTION = "Going back to our earlier chat: how much does Northwind Traders hold?"
BOB_QUESTION = "What is the overdraft policy for accounts?"
HTTP_QUESTION = "One more on that project: which desk approves the wires?"
# What only alice's first turn says: memory must carry it to her later turns, never to bob.
ALICE_MARKERS = ("Zephyr-42", "Moreau", "Alice")


@dataclass(frozen=True)
class Branch:
    name: str
    route: str  # what the fake router prompt answers
    app: str  # which GraphRAG process (USE_CYPHER differs)


BRANCHES = (
    Branch("supportai", "vectorstore", "main"),
    Branch("inquiryai", "functions", "main"),
    Branch("cypher", "functions", "cypher"),
)


@dataclass
class Run:
    mode: str  # "stock" | "memory"
    tg: GraphRAGTigerGraph
    llm: GraphRAGLLM
    apps: dict[str, GraphRAGApp] = field(default_factory=dict)
    chats: dict[str, Chat] = field(default_factory=dict)
    reconnect: Chat | None = None
    bob: Chat | None = None
    http: dict[str, Answer] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    asserted: list[str] = field(default_factory=list)

    failures: list[str] = field(default_factory=list)
    http_query_prompts: list[Prompt] = field(default_factory=list)

    def check(self, condition: bool, what: str, detail: Any = "") -> None:
        """Records whether `condition` holds; the run goes on, so one run reports every
        failure (`verdict` raises them all)."""
        self.asserted.append(what if condition else f"FAILED: {what}")
        if not condition:
            self.failures.append(f"{what}\n    {str(detail)[:1500]}")

    def verdict(self) -> None:
        if self.failures:
            raise AssertionError(
                f"{len(self.failures)} check(s) failed:\n" + "\n".join(self.failures)
            )


def prepare_code(mode: str, src: Path, build: VenvBuild, run_dir: Path, run: Run) -> Path:
    """The /code folder for this mode; with memory, from a copy of the checkout that
    `graphrag-memory-integrate` patched (the given checkout is never changed)."""
    tree = src
    if mode == "memory":
        tree = run_dir / "graphrag"
        shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git"))
        start = time.monotonic()
        run.notes["integration"] = apply_integration(tree, build).strip()[-2000:]
        run.timings["integration applied (s)"] = time.monotonic() - start
    return build_code_dir(tree, run_dir / "code")


async def start_apps(
    run: Run,
    build: VenvBuild,
    code: Path,
    run_dir: Path,
    *,
    chat_history: ChatHistory | None,
    memory_address: str | None,
) -> None:
    config = server_config(
        tg_host=f"http://{run.tg.host}",
        tg_user=("tigergraph", PASSWORDS["tigergraph"]),
        llm_base_url=run.llm.base_url,
        chat_history_api=chat_history.url if chat_history else None,
        memory_address=memory_address,
    )
    for name, cypher in (("main", False), ("cypher", True)):
        app = await start_app(name, build, code, run_dir, config, use_cypher=cypher)
        run.apps[name] = app
        run.timings[f"app {name} started (s)"] = app.started_s


async def drive(run: Run, before_turn: BeforeTurn | None = None) -> None:
    """The conversations and the HTTP routes, recorded in `run`."""
    main = run.apps["main"]
    for branch in BRANCHES:
        run.llm.route = branch.route
        app = run.apps[branch.app]
        start = time.monotonic()
        run.chats[branch.name] = await chat(
            app.url, GRAPH, ALICE, run.llm, QUESTIONS, before_turn=before_turn
        )
        run.timings[f"{branch.name}: 3 turns (s)"] = time.monotonic() - start
    sources = run.chats["inquiryai"].turns[0].reply.get("query_sources") or {}
    errors = [str(e.get("error_message")) for e in sources.get("error_history") or []]
    if errors:
        run.notes["inquiryai errors"] = f"{len(errors)}x, first: {errors[0][:200]}"
    # A new websocket on the inquiryai conversation: what GraphRAG loads as its history.
    run.llm.route = "functions"
    earlier = run.chats["inquiryai"].conversation_id
    run.reconnect = await chat(
        main.url, GRAPH, ALICE, run.llm, [RECONNECT_QUESTION], conversation_id=earlier
    )
    run.llm.route = "vectorstore"
    run.bob = await chat(main.url, GRAPH, BOB, run.llm, [BOB_QUESTION])
    # GraphRAG's HTTP chat route, on the supportai conversation (the integration edits it too).
    mark = run.llm.mark()
    asked = HistoryRoutes(main.url, GRAPH, ALICE, scoped=False)
    run.http["http query"] = await asked.query(
        HTTP_QUESTION, run.chats["supportai"].conversation_id
    )
    run.http_query_prompts = run.llm.since(mark)

    # The stock UI's paths, then the graph-scoped ones where the app serves them: a thumbs up
    # on turn 1's reply through the first, a thumbs down on turn 2's through the second.
    first = run.chats["supportai"]
    scoped_too = "/ui/{graphname}/feedback" in main.routes
    if main.openapi_error:
        run.notes["openapi"] = f"{main.openapi_error} (routes probed instead)"
        scoped_too = await main.serves(f"/ui/{GRAPH}/user")
    run.notes["history routes"] = "stock paths" + (" and graph-scoped" if scoped_too else "")
    for scoped in (False, True) if scoped_too else (False,):
        key = "scoped " if scoped else ""
        alice = HistoryRoutes(main.url, GRAPH, ALICE, scoped=scoped)
        bob = HistoryRoutes(main.url, GRAPH, BOB, scoped=scoped)
        rated = first.turns[1 if scoped else 0].reply
        value, comment = (2, "too long") if scoped else (1, "clear and correct")
        run.http[key + "feedback"] = await alice.feedback(rated, value, comment)
        run.http[key + "conversation"] = await alice.conversation(first.conversation_id)
        run.http[key + "conversations"] = await alice.conversations()
        run.http[key + "bob conversations"] = await bob.conversations()
        peek = await bob.conversation(first.conversation_id)
        run.http[key + "bob reads alice's conversation"] = peek
        run.http[key + "feedback export"] = await alice.feedback_export()
        run.http[key + "bob's feedback export"] = await bob.feedback_export()


def dump(run: Run, path: Path) -> None:
    """Every turn (question, reply, prompts with their kind) as JSON, for reading a failure."""
    chats = dict(run.chats)
    if run.reconnect is not None:
        chats["reconnect"] = run.reconnect
    if run.bob is not None:
        chats["bob"] = run.bob
    out = {
        name: {
            "conversation_id": c.conversation_id,
            "turns": [
                {
                    "question": t.question,
                    "reply": t.reply,
                    "prompts": [
                        {"kind": p.kind, "text": p.text, "reply": p.reply} for p in t.prompts
                    ],
                }
                for t in c.turns
            ],
        }
        for name, c in chats.items()
    }
    path.write_text(json.dumps(out, indent=1))


def stop_apps(run: Run) -> None:
    for app in run.apps.values():
        app.stop()

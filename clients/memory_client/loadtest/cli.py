"""Command line: ghz's flags and config-file keys (a subset), so a ghz command line or
config file runs here unchanged (protos come from the installed stubs, not from files)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from memory_client.loadtest.report import summary
from memory_client.loadtest.runner import LoadTestError, Options, run

DEFAULT_HOST = "127.0.0.1:50051"
FORMATS = ("summary", "json", "pretty")
# ghz config keys that this tool reads.
CONFIG_KEYS = {
    "call",
    "host",
    "insecure",
    "cacert",
    "total",
    "concurrency",
    "connections",
    "duration",
    "timeout",
    "connect-timeout",
    "data",
    "data-file",
    "metadata",
    "format",
    "output",
    "name",
}
# ghz keys accepted and ignored: the stubs are compiled in, the rest does not apply.
IGNORED_KEYS = {"proto", "protoset", "import-paths", "reflect-metadata", "cpus", "debug", "tags"}

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | float | int) -> float:
    """Go's duration syntax ("10s", "1m30s", "250ms") or a plain number of seconds."""
    if isinstance(text, int | float):
        return float(text)
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    if value in ("", "0"):
        return 0.0
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNIT_S[match.group(2)]
        position = match.end()
    if position != len(value) or position == 0:
        raise LoadTestError(f"invalid duration {text!r} (examples: 10s, 1m30s, 250ms)")
    return seconds


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m memory_client.loadtest",
        description="ghz-compatible gRPC load tool for the memory service (grpc.aio).",
    )
    p.add_argument("target", nargs="?", help="host:port (as ghz's positional host)")
    p.add_argument("--config", help="ghz JSON config file; flags given here override it")
    p.add_argument("--call", help="e.g. graphrag.memory.v1.MemoryService/StartTurn")
    p.add_argument("--host", help=f"host:port (default {DEFAULT_HOST})")
    p.add_argument("-c", "--concurrency", type=int, help="concurrent workers (default 50)")
    p.add_argument("-n", "--total", type=int, help="requests to make (default 200)")
    p.add_argument("-z", "--duration", help="run for this long instead of -n (e.g. 10s)")
    p.add_argument("-d", "--data", help="call data: a JSON object (or list), templated")
    p.add_argument("-D", "--data-file", dest="data_file", help="call data from a JSON file")
    p.add_argument("-m", "--metadata", help="request metadata as a JSON object")
    p.add_argument("-t", "--timeout", help="per-call timeout (default 20s; 0 for none)")
    p.add_argument("--connect-timeout", dest="connect_timeout", help="default 10s")
    p.add_argument("--connections", type=int, help="channels to spread workers on (default 1)")
    p.add_argument(
        "--insecure",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="plaintext (the default); --no-insecure for TLS",
    )
    p.add_argument("--cacert", help="CA certificate for TLS")
    p.add_argument("-O", "--format", choices=FORMATS, help="summary (default), json, pretty")
    p.add_argument("-o", "--output", help="write the report to this file instead of stdout")
    p.add_argument("--name", help="a name for the run (in the report)")
    return p


def load_config(path: str) -> dict[str, Any]:
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LoadTestError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise LoadTestError(f"config {path} is not a JSON object")
    unknown = set(config) - CONFIG_KEYS - IGNORED_KEYS
    if unknown:
        raise LoadTestError(f"config {path}: unsupported keys {sorted(unknown)}")
    return config


def _json_arg(what: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoadTestError(f"{what} is not valid JSON: {exc}") from exc


def resolve(args: argparse.Namespace) -> tuple[Options, str, str]:
    """Options from defaults < config file < flags; plus the format and output path."""
    config = load_config(args.config) if args.config else {}
    flags: dict[str, Any] = {
        "call": args.call,
        "host": args.host or args.target,
        "insecure": args.insecure,
        "cacert": args.cacert,
        "total": args.total,
        "concurrency": args.concurrency,
        "connections": args.connections,
        "duration": args.duration,
        "timeout": args.timeout,
        "connect-timeout": args.connect_timeout,
        "data": _json_arg("--data", args.data) if args.data is not None else None,
        "data-file": args.data_file,
        "metadata": _json_arg("--metadata", args.metadata) if args.metadata else None,
        "format": args.format,
        "output": args.output,
        "name": args.name,
    }
    merged = {**config, **{k: v for k, v in flags.items() if v is not None}}
    if args.data is not None:
        merged.pop("data-file", None)
    elif args.data_file is not None:
        merged.pop("data", None)
    if not merged.get("call"):
        raise LoadTestError("--call is required (or `call` in the config file)")
    data = merged.get("data")
    if data is None and merged.get("data-file"):
        data = _json_arg("data file", Path(merged["data-file"]).read_text())
    metadata = merged.get("metadata")
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ):
        raise LoadTestError("metadata must be a JSON object of strings")
    out_format = merged.get("format") or "summary"
    if out_format not in FORMATS:
        raise LoadTestError(f"format must be one of {', '.join(FORMATS)}")
    options = Options(
        call=str(merged["call"]),
        host=str(merged.get("host") or DEFAULT_HOST),
        concurrency=int(merged.get("concurrency") or 50),
        total=int(merged.get("total") or 200),
        duration_s=parse_duration(merged.get("duration") or 0),
        data=data,
        metadata=metadata,
        insecure=bool(merged.get("insecure", True)),
        cacert=str(merged.get("cacert") or ""),
        connections=int(merged.get("connections") or 1),
        timeout_s=parse_duration(merged["timeout"]) if "timeout" in merged else 20.0,
        connect_timeout_s=parse_duration(merged.get("connect-timeout") or "10s"),
        name=str(merged.get("name") or ""),
    )
    return options, out_format, str(merged.get("output") or "")


def render_report(report: dict[str, Any], out_format: str) -> str:
    if out_format == "json":
        return json.dumps(report) + "\n"
    if out_format == "pretty":
        return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    return summary(report)


async def main_async(argv: list[str] | None = None, stdout: TextIO | None = None) -> int:
    """Runs the tool on the current event loop; returns the exit status."""
    out = stdout or sys.stdout
    args = parser().parse_args(argv)
    try:
        options, out_format, output = resolve(args)
        report = await run(options)
    except LoadTestError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 1
    text = render_report(report, out_format)
    if output:
        Path(output).write_text(text)
    else:
        out.write(text)
        out.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(argv))

"""memoryctl's entry point: parse, connect, run one command, turn failures into one line on
stderr and an exit status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from memory_client.cli._exit import ExitCode, UsageError, for_status
from memory_client.cli._output import Output
from memory_client.cli._parser import build_parser
from memory_client.client import MemoryClient
from memory_client.errors import MemoryClientError


def _error(message: str) -> None:
    flat = " ".join(message.split())
    sys.stderr.write(f"memoryctl: {flat}\n")


def _connect(args: argparse.Namespace) -> MemoryClient:
    root_certificates = None
    if args.ca_file:
        try:
            root_certificates = Path(args.ca_file).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read --ca-file {args.ca_file}: {exc.strerror}") from exc
    return MemoryClient(
        args.target,
        timeout_s=args.timeout,
        tls=args.tls or root_certificates is not None,
        root_certificates=root_certificates,
        token=args.token,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Runs memoryctl and returns its exit status (see ExitCode); the console script hands it
    to sys.exit. `argv` defaults to sys.argv[1:]."""
    parser = build_parser(os.environ)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits by itself after --help (0) or a usage error (2, message printed);
        # returning the status keeps main one function with one way out.
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
    out = Output(sys.stdout, json=args.json)
    try:
        with _connect(args) as client:
            status: ExitCode = args.run(client, args, out)
            sys.stdout.flush()
            return int(status)
    except UsageError as exc:
        _error(str(exc))
        return ExitCode.USAGE
    except MemoryClientError as exc:
        details = f": {exc.details}" if exc.details else ""
        _error(f"{exc.method} failed: {exc.code.name}{details}")
        return for_status(exc.code)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader (`| head`) left. Point stdout at /dev/null so the interpreter's final
        # flush does not fail again with a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.FAILED

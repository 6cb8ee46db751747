"""memoryctl's exit statuses: the one table, from gRPC status codes to what a script may branch
on. `memoryctl --help` prints it (see `epilog`)."""

from __future__ import annotations

from enum import IntEnum

import grpc


class ExitCode(IntEnum):
    """What a script can branch on: 5 means try again later, 3 and 4 mean do not."""

    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    INVALID_ARGUMENT = 4
    UNAVAILABLE = 5
    DENIED = 6
    RESOURCE_EXHAUSTED = 7
    INTERRUPTED = 130


class UsageError(Exception):
    """A command line that argparse accepts but memoryctl will not run (a missing --yes, an
    unreadable file); exit status USAGE, like argparse's own errors."""


_BY_STATUS: dict[grpc.StatusCode, ExitCode] = {
    grpc.StatusCode.NOT_FOUND: ExitCode.NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT: ExitCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAVAILABLE: ExitCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ExitCode.UNAVAILABLE,
    grpc.StatusCode.UNAUTHENTICATED: ExitCode.DENIED,
    grpc.StatusCode.PERMISSION_DENIED: ExitCode.DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ExitCode.RESOURCE_EXHAUSTED,
}

# Meanings the status names of _BY_STATUS do not carry by themselves.
_MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "success (health: SERVING)",
    ExitCode.FAILED: "any other failed RPC (INTERNAL, ALREADY_EXISTS, FAILED_PRECONDITION, "
    "...),\n       or health not SERVING",
    ExitCode.USAGE: "usage error: bad arguments, a missing --yes, a time without a timezone",
    ExitCode.UNAVAILABLE: "try again later",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C), as shells count it",
}


def for_status(code: grpc.StatusCode) -> ExitCode:
    return _BY_STATUS.get(code, ExitCode.FAILED)


def epilog() -> str:
    lines = ["exit status:"]
    for exit_code in ExitCode:
        meaning = " or ".join(s.name for s, e in _BY_STATUS.items() if e is exit_code)
        if exit_code in _MEANING:
            meaning = f"{meaning} ({_MEANING[exit_code]})" if meaning else _MEANING[exit_code]
        lines.append(f"  {exit_code.value:>3}  {meaning}")
    return "\n".join(lines)

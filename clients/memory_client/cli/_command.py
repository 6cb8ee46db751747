"""A memoryctl subcommand: the RPC it makes, and how the answer reads for people. Printing the
response as JSON (--json) and turning the answer into an exit status happen here, once."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message

from memory_client.cli._exit import ExitCode
from memory_client.cli._output import Output
from memory_client.client import MemoryClient

M = TypeVar("M", bound=Message)

Call = Callable[[MemoryClient, Namespace], M]
Text = Callable[[M, Namespace, Output], None]


def _ok(response: Message) -> ExitCode:
    return ExitCode.OK


@dataclass(frozen=True)
class Command(Generic[M]):
    """`call` makes the RPC (a failed one raises MemoryClientError, which `main` reports) and
    returns the response; `text` prints it for people, and is not run under --json; `status`
    is the exit status the response means."""

    call: Call[M]
    text: Text[M]
    status: Callable[[M], ExitCode] = _ok

    def __call__(self, client: MemoryClient, args: Namespace, out: Output) -> ExitCode:
        response = self.call(client, args)
        if out.json:
            out.message_json(response)
        else:
            self.text(response, args, out)
        return self.status(response)


def command(
    call: Call[M], *, status: Callable[[M], ExitCode] = _ok
) -> Callable[[Text[M]], Command[M]]:
    """The decorated function, which prints the response of `call` for people, becomes the
    Command that makes the call."""

    def make(text: Text[M]) -> Command[M]:
        return Command(call, text, status)

    return make

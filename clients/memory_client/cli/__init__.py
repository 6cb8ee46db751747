"""`memoryctl`: the command line for people, over the blocking MemoryClient.

`memoryctl [global options] COMMAND [options]`, one command per client method (see `memoryctl
--help`); `python -m memory_client.cli` is the same. `main(argv)` returns the exit status, one
of `ExitCode`, so tests and scripts can call it in-process."""

from memory_client.cli._exit import ExitCode
from memory_client.cli._main import main

__all__ = ["ExitCode", "main"]

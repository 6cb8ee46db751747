"""A ghz-compatible load tool for the memory service, bundled because ghz itself (Go) is not
always installable: `python -m memory_client.loadtest --call
graphrag.memory.v1.MemoryService/StartTurn -c 16 -n 1000 -d '{...}' --host 127.0.0.1:50051`.

It takes ghz's flags and config-file keys (`--config loadtest/ghz/start_turn.json`), renders
ghz's call-data templates ({{.RequestNumber}}, {{.WorkerID}}, {{.UUID}}, …) and reports in
ghz's summary and JSON formats (latencies in nanoseconds)."""

from memory_client.loadtest.cli import main, main_async
from memory_client.loadtest.runner import LoadTestError, Options, run

__all__ = ["LoadTestError", "Options", "main", "main_async", "run"]

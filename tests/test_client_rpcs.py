"""The clients' RPC table (memory_client.client): one entry per RPC makes a method of both
clients, with the builder's signature and docstring, typed exactly for callers."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from memory_client import AsyncMemoryClient, MemoryClient
from memory_client._rpc import RpcMethod, rpc
from memory_client.client import _Rpcs
from memory_client.v1 import memory_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
# The table's entries, its long-term memory part (memory_client._fact_rpcs) included.
ENTRIES = {
    name: entry
    for table in _Rpcs.__mro__
    for name, entry in vars(table).items()
    if isinstance(entry, RpcMethod)
}


def test_every_rpc_of_the_service_has_one_entry() -> None:
    service = pb.DESCRIPTOR.services_by_name["MemoryService"]
    on_memory = sorted(e.spec.name for e in ENTRIES.values() if e.spec.service == "memory")
    assert on_memory == sorted(method.name for method in service.methods)
    assert [e.spec.name for e in ENTRIES.values() if e.spec.service == "health"] == ["Check"]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_both_clients_get_the_method(name: str) -> None:
    async_method = getattr(AsyncMemoryClient, name)
    sync_method = getattr(MemoryClient, name)
    assert inspect.iscoroutinefunction(async_method)
    assert not inspect.iscoroutinefunction(sync_method)
    assert inspect.signature(async_method) == inspect.signature(sync_method)
    assert inspect.getdoc(async_method) == inspect.getdoc(sync_method)
    parameters = inspect.signature(sync_method).parameters
    assert parameters["timeout_s"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["timeout_s"].default is None


def test_a_builder_without_timeout_is_refused() -> None:
    with pytest.raises(TypeError, match="timeout_s"):

        @rpc("GetFact", pb.GetFactResponse, retry_if=lambda request: True)
        def get_fact(self: object, fact_id: str) -> pb.GetFactRequest:
            return pb.GetFactRequest(fact_id=fact_id)


def test_callers_see_exact_types(tmp_path: Path) -> None:
    caller = tmp_path / "caller.py"
    caller.write_text(
        textwrap.dedent(
            """
            from memory_client import AsyncMemoryClient, MemoryClient

            async def use(a: AsyncMemoryClient, s: MemoryClient) -> None:
                reveal_type(a.start_turn)
                reveal_type(await a.health())
                reveal_type(s.search_facts)
                with s as entered:
                    reveal_type(entered)
                s.get_fact("u", "g", "f", timeout_s="soon")
                s.start_turn("u", "g", "c", "hi", mesage_id="m1")
            """
        )
    )
    out, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(caller)]
    )
    assert status == 1
    revealed = [
        line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Reveal" in line
    ]
    assert revealed == [
        '"def (username: str, graphname: str, conversation_id: str, content: str, *, '
        "message_id: str =, conversation_name: str =, timeout_s: float | None =) -> "
        'typing.Coroutine[Any, Any, memory_client.v1.memory_pb2.StartTurnResponse]"',
        '"bool"',
        '"def (username: str, graphname: str, query: str, *, top_k: int =, '
        "threshold: float | None =, as_of_valid_time: datetime.datetime | None =, "
        "as_of_transaction_time: datetime.datetime | None =, timeout_s: float | None =) -> "
        'memory_client.v1.memory_pb2.SearchFactsResponse"',
        '"memory_client.client.MemoryClient"',
    ]
    assert 'Argument "timeout_s" has incompatible type "str"' in out
    assert 'Unexpected keyword argument "mesage_id"' in out

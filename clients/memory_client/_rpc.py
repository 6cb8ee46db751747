"""`@rpc`: one entry of the clients' RPC table. The entry is the RPC's request builder, written
once, with the RPC's name and retry rule; on AsyncMemoryClient it is an async method, on
MemoryClient a blocking one, with the builder's signature and docstring.

The builder's parameters are the method's, `timeout_s` last and keyword-only: the call takes it
(it is the budget of the call, not a field of the request), so the builder never sees it.

Typing: `RpcMethod` is a descriptor whose `__get__` is overloaded on the client it is read from.
Read from an AsyncTransport it is `Callable[P, Coroutine[Any, Any, T]]`, from a SyncTransport
`Callable[P, T]`, where P is the builder's parameters (ParamSpec) and T the response type (or what
`.returning(f)` makes of it). So mypy --strict and pyright see each client's methods with their
exact keyword signatures and return types, and pyright's hover shows the builder's docstring, as
for a plain method; help() and inspect.signature show the method's signature (see `_like`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from types import MethodType
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from google.protobuf.message import Message

from memory_client._retry import RetryRule
from memory_client._transport import AsyncTransport, RpcSpec, SyncTransport

__all__ = ["RpcEntry", "RpcMethod", "rpc"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
U = TypeVar("U")

# A builder is a method of the RPC table: its first parameter is the client, unused.
Builder = Callable[Concatenate[Any, P], Message]


class RpcMethod(Generic[P, T]):
    """An RPC as a method of either client (see the module docstring)."""

    def __init__(
        self, spec: RpcSpec, build: Builder[P], result: Callable[[Any], T], returns: Any
    ) -> None:
        signature = inspect.signature(build)
        timeout = signature.parameters.get("timeout_s")
        if timeout is None or timeout.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{build.__qualname__} needs a keyword-only `timeout_s` parameter")
        self.spec = spec

        async def call_async(client: AsyncTransport, /, *args: Any, **kwargs: Any) -> Any:
            timeout_s = kwargs.pop("timeout_s", None)
            return result(await client._call(spec, build(client, *args, **kwargs), timeout_s))

        def call_sync(client: SyncTransport, /, *args: Any, **kwargs: Any) -> Any:
            timeout_s = kwargs.pop("timeout_s", None)
            return result(client._call(spec, build(client, *args, **kwargs), timeout_s))

        self._async = _like(call_async, build, signature, returns)
        self._sync = _like(call_sync, build, signature, returns)

    @overload
    def __get__(
        self, client: None, owner: type[AsyncTransport]
    ) -> Callable[Concatenate[AsyncTransport, P], Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(
        self, client: None, owner: type[SyncTransport]
    ) -> Callable[Concatenate[SyncTransport, P], T]: ...

    @overload
    def __get__(
        self, client: AsyncTransport, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, client: SyncTransport, owner: type[Any]) -> Callable[P, T]: ...

    def __get__(self, client: object, owner: type[Any]) -> Any:
        if issubclass(owner, AsyncTransport):
            function = self._async
        elif issubclass(owner, SyncTransport):
            function = self._sync
        else:
            return self  # read from the table itself
        return function if client is None else MethodType(function, client)


def _like(
    function: Callable[..., Any],
    build: Callable[..., Any],
    signature: inspect.Signature,
    returns: Any,
) -> Callable[..., Any]:
    """`function` dressed as the method it stands for, for help(), inspect and
    typing.get_type_hints: the builder's name, docstring and parameters, the call's return."""
    functools.update_wrapper(function, build)
    function.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
    function.__annotations__ = {**build.__annotations__, "return": returns}
    return function


def _identity(response: Any) -> Any:
    return response


class RpcEntry(Generic[T]):
    """What `rpc(...)` returns: applied to a builder, it makes the RpcMethod, which returns the
    response; `.returning(f)` makes one that returns `f(response)` instead."""

    def __init__(self, spec: RpcSpec, result: Callable[[Any], T], returns: Any) -> None:
        self._spec = spec
        self._result = result
        self._returns = returns

    def __call__(self, build: Builder[P]) -> RpcMethod[P, T]:
        return RpcMethod(self._spec, build, self._result, self._returns)

    def returning(self, result: Callable[[T], U]) -> RpcEntry[U]:
        returns = inspect.signature(result).return_annotation
        return RpcEntry(self._spec, lambda response: result(self._result(response)), returns)


def rpc(
    name: str,
    response: type[R],
    *,
    retry_if: RetryRule,
    service: Literal["memory", "health"] = "memory",
) -> RpcEntry[R]:
    """The RPC `name` on `service`, answering `response`; a request for which `retry_if` is
    false is never sent twice."""
    return RpcEntry(RpcSpec(name, service, retry_if), _identity, response)

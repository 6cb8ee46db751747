"""Who may export every user's feedback, decided as GraphRAG's chat-history decided it.

Chat-history ran `SHOW USER` against TigerGraph with the caller's own credentials and compared
the caller's global roles with `chat_config.conversationAccessRoles` (tigergraph/graphrag
cc4eed1, chat-history/routes/routes.go:203-262). `show_user_admin` is that rule as a FastAPI
dependency for `memory_ui_router(..., is_admin=...)`; `GraphRAGIntegration.install` uses it
when GraphRAG's server_config names admin roles. It connects with pyTigerGraph, which GraphRAG
installs (the client does not depend on it).
"""

# No `from __future__ import annotations` here: FastAPI resolves the dependency's annotations at
# run time, and `Annotated[Any, Depends(current_user)]` names a closure variable.
import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import Depends

from memory_client.graphrag.roles import (
    conversation_access_roles,
    global_roles,
    has_admin_role,
)

__all__ = ["show_user_admin"]

log = logging.getLogger(__name__)


def _show_user(db_config: Mapping[str, Any], username: str, password: str) -> str:
    from pyTigerGraph import TigerGraphConnection  # type: ignore[import-untyped]

    conn = TigerGraphConnection(
        host=str(db_config["hostname"]),
        graphname="",
        username=username,
        password=password,
        restppPort=str(db_config.get("restppPort", "9000")),
        gsPort=str(db_config.get("gsPort", "14240")),
    )
    return str(conn.gsql("SHOW USER"))


def show_user_admin(
    server_config: Mapping[str, Any], current_user: Callable[..., Any]
) -> Callable[..., bool] | None:
    """A dependency answering whether the caller (GraphRAG's `ui_basic_auth` pair: graphs and
    HTTP Basic credentials) holds one of the configured admin roles; None when the config
    names no admin role or no TigerGraph host (then nobody is an admin). A failed `SHOW USER`
    answers no, and is logged."""
    admin_roles = conversation_access_roles(server_config)
    db_config = server_config.get("db_config")
    if not admin_roles or not isinstance(db_config, Mapping) or not db_config.get("hostname"):
        return None

    # A plain def: FastAPI runs it in its thread pool, off the event loop.
    def is_admin(auth: Annotated[Any, Depends(current_user)]) -> bool:
        credentials = auth[1] if isinstance(auth, tuple | list) and len(auth) == 2 else None
        username = getattr(credentials, "username", None)
        password = getattr(credentials, "password", None)
        if not isinstance(username, str) or not isinstance(password, str):
            return False
        try:
            listing = _show_user(db_config, username, password)
        except Exception as exc:  # TigerGraph down or refusing: not an admin this time
            log.warning(
                "memory: SHOW USER failed (%s); not treated as an admin", type(exc).__name__
            )
            return False
        return has_admin_role(global_roles(listing, username), admin_roles)

    return is_admin

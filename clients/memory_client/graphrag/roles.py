"""Who may read every user's feedback: GraphRAG's admin rule, in a form the UI router can use.

Chat-history let a user read all users' messages from `GET /get_feedback` when one of the
user's TigerGraph global roles is in `chat_config.conversationAccessRoles` of GraphRAG's
`server_config.json`; the roles came from the GSQL command `SHOW USER` run with the caller's own
credentials (tigergraph/graphrag cc4eed1, chat-history/routes/routes.go:203-262,
configs/server_config.json:36-45). The pieces here do the same without the Go service:

* `global_roles(show_user_output, username)` reads one user's global roles out of `SHOW USER`'s
  text. A user section starts at the line `- Name: <user>` and the name must match exactly
  (chat-history matched any name containing the user's, so `sam` read `samuel`'s roles);
* `conversation_access_roles(server_config)` is the configured admin role list (empty when the
  file has none: then nobody is an admin);
* `has_admin_role(roles, admin_roles)`.

`memory_ui_router(..., is_admin=...)` takes a FastAPI dependency returning a bool; the
integration guide shows one built from these and pyTigerGraph's `gsql("SHOW USER")`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["conversation_access_roles", "global_roles", "has_admin_role"]

_NAME = "- Name:"
_GLOBAL_ROLES = "- Global Roles:"


def global_roles(show_user_output: str, username: str) -> list[str]:
    """The global roles `SHOW USER` lists for `username` (an empty list when it lists none)."""
    roles: list[str] = []
    in_section = False
    for line in show_user_output.splitlines():
        item = line.strip()
        if item.startswith(_NAME):
            in_section = item[len(_NAME) :].strip() == username
        elif in_section and item.startswith(_GLOBAL_ROLES):
            listed = item[len(_GLOBAL_ROLES) :].split(",")
            roles.extend(role.strip() for role in listed if role.strip())
    return roles


def conversation_access_roles(server_config: Mapping[str, Any]) -> list[str]:
    """`chat_config.conversationAccessRoles` of GraphRAG's server_config.json, or []."""
    chat = server_config.get("chat_config")
    roles = chat.get("conversationAccessRoles") if isinstance(chat, Mapping) else None
    if not isinstance(roles, list):
        return []
    return [role for role in roles if isinstance(role, str) and role]


def has_admin_role(roles: Iterable[str], admin_roles: Iterable[str]) -> bool:
    return not set(roles).isdisjoint(admin_roles)

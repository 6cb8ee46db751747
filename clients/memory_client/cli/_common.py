"""What the commands share: text from stdin, the --yes guard and following page tokens."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from memory_client.cli._exit import UsageError


class _Paged(Protocol):
    next_page_token: str


P = TypeVar("P", bound=_Paged)


def text_of(value: str) -> str:
    """The argument itself, or standard input for "-". Trailing newlines are dropped, as the
    shell does for $(...), so `echo hi | memoryctl start-turn ... -` sends "hi"."""
    if value != "-":
        return value
    try:
        return sys.stdin.read().rstrip("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read standard input: {exc}") from exc


def require_yes(args: argparse.Namespace, what: str) -> None:
    """Erasures run only with --yes: there is no undo, and no prompt to wait on in a script."""
    if not args.yes:
        raise UsageError(f"{args.command} {what}; nothing was done. Pass --yes to confirm")


def collect(fetch: Callable[[str], P], token: str, field: str, *, follow: bool) -> P:
    """One page, or with `follow` every page from `token` on, merged into the first response
    (its repeated `field` extended, its next_page_token cleared) so --json prints one object."""
    merged = fetch(token)
    if not follow:
        return merged
    token = merged.next_page_token
    while token:
        page = fetch(token)
        items: Any = getattr(merged, field)
        items.extend(getattr(page, field))
        token = page.next_page_token
    merged.next_page_token = ""
    return merged

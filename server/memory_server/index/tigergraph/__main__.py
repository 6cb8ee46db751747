"""`python -m memory_server.index.tigergraph install-schema ...`: the same install the server
runs at start (tigergraph_install_schema), by hand."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from memory_server.index.tigergraph._client import ConnArgs, TigerGraphIndexError
from memory_server.index.tigergraph._schema import install_schema
from memory_server.memory.errors import Unavailable


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_server.index.tigergraph")
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install-schema", help="create (or migrate) the memory types and queries")
    inst.add_argument("--host", required=True, help="e.g. http://tigergraph:14240")
    inst.add_argument("--graph", required=True)
    inst.add_argument("--token")
    inst.add_argument("--gsql-secret")
    inst.add_argument("--username")
    inst.add_argument("--password")
    inst.add_argument("--dimension", type=int, default=384)
    inst.add_argument("--timeout", type=float, default=600.0)
    inst.add_argument("--no-tls-verify", action="store_true")
    args = parser.parse_args(argv)
    conn_args = ConnArgs(
        args.host,
        args.graph,
        args.token,
        args.gsql_secret,
        args.username,
        args.password,
        args.timeout,
        not args.no_tls_verify,
    )
    try:
        changed = asyncio.run(install_schema(conn_args, args.dimension))
    except (TigerGraphIndexError, Unavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("installed" if changed else "already installed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

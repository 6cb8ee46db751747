"""`python -m memory_client.cli`: see memory_client.cli."""

from __future__ import annotations

from memory_client.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

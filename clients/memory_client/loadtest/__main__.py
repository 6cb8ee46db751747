"""`python -m memory_client.loadtest`: see memory_client.loadtest.cli."""

from __future__ import annotations

import sys

from memory_client.loadtest.cli import main

if __name__ == "__main__":
    sys.exit(main())

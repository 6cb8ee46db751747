"""The domain: what memory knows and decides, importing neither grpc nor asyncpg.

Rooms: turn (the use cases a request drives), conversation (short-term memory), facts (the
fact and its reconciliation), recall (finding facts for a question), learning (the offline
extractor), time (event time and time questions), ports (the Protocols adapters implement).
Shared by all: identity (the scope), errors, background (owned background tasks)."""

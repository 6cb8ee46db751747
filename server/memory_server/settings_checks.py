"""What a setting's value must be: its type (a value from a file, the environment or a flag is
coerced to the field's) and its range, and the checks across settings. Settings calls them once,
when it is built (memory_server.settings)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_server.database_url import DatabaseUrlError, parse_database_url

if TYPE_CHECKING:
    from memory_server.settings import Settings

__all__ = ["LOG_FORMATS", "SettingsError", "coerce", "validate"]


class SettingsError(ValueError):
    """A configuration value is missing, malformed or out of range."""


# Range checks: key -> (minimum, maximum); None = unbounded.
_RANGES: dict[str, tuple[float | None, float | None]] = {
    "stm_context_tokens": (256, 1_000_000),
    "ltm_top_k": (1, 100),
    "ltm_score_threshold": (0.0, 1.0),
    "ltm_time_intent_weight": (0.0, 1.0),
    "ltm_common_word_share": (0.0, 1.0),
    "ltm_off_subject_weight": (0.0, 1.0),
    "ltm_retention_days": (1, None),
    "max_facts_per_scope": (1, 1_000_000),
    "ltm_link_threshold": (0.0, 1.0),
    "ltm_links_per_fact": (0, 100),
    "ltm_link_decay": (0.0, 1.0),
    "ltm_link_seeds": (0, 100),
    "ltm_neighbour_decay": (0.0, 1.0),
    "episode_top_k": (0, 100),
    "episode_score_threshold": (0.0, 1.0),
    "episode_context_tokens": (0, 1_000_000),
    "episode_neighbour_decay": (0.0, 1.0),
    "ltm_second_hop_weight": (0.0, 1.0),
    "ltm_second_hop_bridges": (0, 10),
    "max_message_bytes": (1024, 16 * 1024 * 1024),
    "max_messages_per_append": (1, 100_000),
    "max_request_bytes": (64 * 1024, 1024 * 1024 * 1024),
    "mailbox_size": (1, 1_000_000),
    "actor_idle_seconds": (0.01, None),
    "summary_budget_ratio": (0.05, 0.9),
    "llm_timeout_seconds": (0.1, 600),
    "embedding_dimension": (1, 8192),
    "embedding_batch_size": (1, 4096),
    "embedding_max_wait_ms": (0, 10_000),
    "embedding_cache_size": (0, 1_000_000),
    "outbox_batch_size": (1, 10_000),
    "pgvector_hnsw_ef_search": (1, 1000),
    "outbox_poll_seconds": (0.01, 3600),
    "outbox_max_backoff_seconds": (0.1, 3600),
    "outbox_linger_seconds": (0.0, 60),
    "retention_interval_seconds": (1, 7 * 86400),
    "db_pool_min_size": (0, 1000),
    "db_pool_max_size": (1, 1000),
    "db_pool_wait_seconds": (0.01, 3600),
    "request_timeout_seconds": (0.1, 3600),
    "shutdown_grace_seconds": (0.0, 3600),
}
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


def coerce(key: str, value: Any, kind: type, source: str) -> Any:
    where = f"{key} (from {source})"
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{where}: expected true or false, got {value!r}")
    if kind is int:
        if isinstance(value, bool):
            raise SettingsError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise SettingsError(f"{where}: expected an integer, got {value!r}")
    if kind is float:
        if isinstance(value, bool):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        number: float | None = None
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        return number
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SettingsError(f"{where}: expected a string, got {value!r}")
    return value


def validate(settings: Settings, sources: Mapping[str, str]) -> None:
    for key, (low, high) in _RANGES.items():
        value = getattr(settings, key)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"[{low}, {high if high is not None else '∞'}]"
            raise SettingsError(
                f"{key} (from {sources.get(key, 'default')}): {value!r} is outside {bounds}"
            )
    if settings.max_message_bytes >= settings.max_request_bytes:
        raise SettingsError(
            "max_request_bytes: must exceed max_message_bytes (a request carries one message "
            "and its ids)"
        )
    if settings.db_pool_min_size > settings.db_pool_max_size:
        raise SettingsError("db_pool_min_size: must not exceed db_pool_max_size")
    for key in ("listen_address", "metrics_address"):
        address = getattr(settings, key)
        if key == "metrics_address" and not address:
            continue
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise SettingsError(
                f"{key} (from {sources.get(key, 'default')}): expected host:port, got {address!r}"
            )
    if settings.log_format not in LOG_FORMATS:
        raise SettingsError(f"log_format: expected one of {', '.join(LOG_FORMATS)}")
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise SettingsError("tls_cert_file: tls_cert_file and tls_key_file go together")
    if settings.tls_client_ca_file and not settings.tls_cert_file:
        raise SettingsError("tls_client_ca_file: mutual TLS needs tls_cert_file and tls_key_file")
    for key in ("tls_cert_file", "tls_key_file", "tls_client_ca_file"):
        path = getattr(settings, key)
        if path and not Path(path).is_file():
            raise SettingsError(f"{key} (from {sources.get(key, 'default')}): no file {path!r}")
    if settings.log_level.upper() not in _LOG_LEVELS:
        raise SettingsError(f"log_level: expected one of {', '.join(_LOG_LEVELS)}")
    if settings.llm_base_url and not settings.llm_model:
        raise SettingsError("llm_model: required when llm_base_url is set")
    if settings.ltm_split_questions and not settings.llm_base_url:
        raise SettingsError(
            "ltm_split_questions: needs llm_base_url (a model writes the questions)"
        )
    if settings.vector_index not in ("pgvector", "tigergraph"):
        raise SettingsError("vector_index: expected pgvector or tigergraph")
    if settings.vector_index == "tigergraph":
        if not settings.tigergraph_host or not settings.tigergraph_graph:
            raise SettingsError(
                "tigergraph_host: tigergraph_host and tigergraph_graph are required when "
                "vector_index is tigergraph"
            )
        if not (
            settings.tigergraph_token
            or settings.tigergraph_gsql_secret
            or (settings.tigergraph_username and settings.tigergraph_password)
        ):
            raise SettingsError(
                "tigergraph_token: set tigergraph_token, tigergraph_gsql_secret, or "
                "tigergraph_username and tigergraph_password"
            )
    if settings.embedding_base_url and not settings.embedding_model:
        raise SettingsError("embedding_model: required when embedding_base_url is set")
    if settings.database_url:
        try:
            parse_database_url(settings.database_url)
        except DatabaseUrlError as exc:
            where = sources.get("database_url", "default")
            raise SettingsError(f"database_url (from {where}): {exc}") from None

"""One frozen Settings object, parsed once in main from (lowest to highest precedence):
defaults < `memory_config` in GraphRAG's server_config.json < GRAPHRAG_MEMORY_* environment <
command-line flags. A bad value is a SettingsError naming the key and where it came from."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memory_server.settings_checks import SettingsError, coerce, validate

__all__ = ["ENV_PREFIX", "Settings", "SettingsError", "load_settings", "settings_from_cli"]

ENV_PREFIX = "GRAPHRAG_MEMORY_"


@dataclass(frozen=True, slots=True)
class Settings:
    # --- GraphRAG's memory_config (same names and defaults) ---
    enabled: bool = True
    database_url: str = ""
    stm_context_tokens: int = 6000
    ltm_top_k: int = 5
    ltm_score_threshold: float = 0.7
    ltm_retention_days: int = 365
    max_facts_per_scope: int = 1000
    fact_extract_async: bool = True
    # --- the service's own settings ---
    # Semantic links (README "Links"): when the outbox indexes a fact version it links it to
    # at most ltm_links_per_fact live facts of the scope with cosine >= ltm_link_threshold
    # (0 links: none written). Recall follows the links of its ltm_link_seeds best hits one
    # hop, a linked fact scoring source * ltm_link_decay * link cosine (decay 0: not followed).
    ltm_link_threshold: float = 0.6
    ltm_links_per_fact: int = 5
    ltm_link_decay: float = 0.5
    ltm_link_seeds: int = 5
    # Recall also brings in the facts said just before and after each of those hits in the
    # same conversation, scoring source * ltm_neighbour_decay (0: not brought in).
    ltm_neighbour_decay: float = 0.75
    # Recall: the vote a fact whose text names a date gets when the question asks about time
    # ("when", "what year", "how long ago"); 0 turns it off (memory.time.intent).
    ltm_time_intent_weight: float = 0.25
    # Recall: a question's words that more than this share of the scope's facts contain (the
    # user's own name) are left out of the question's embedding; 0 embeds it whole
    # (memory.recall.common_words).
    ltm_common_word_share: float = 0.2
    # Recall: those common words written with a capital name the question's subject; a fact
    # that names none of them scores this times its score; 1 weighs every fact alike
    # (memory.recall.common_words).
    ltm_off_subject_weight: float = 0.8
    # Recall: a second search with the question joined to the text of each of its
    # ltm_second_hop_bridges best hits, a fact found that way scoring weight * (bridge + its
    # score) / 2; weight 0 turns it off (memory.recall.second_hop).
    ltm_second_hop_weight: float = 0.0
    ltm_second_hop_bridges: int = 1
    # Recall, with llm_base_url: the model sees the question and its first hits and may write
    # follow-up questions for what they do not answer ("Where does Priya Raman want to
    # travel?" for "Where does my manager want to travel?"); their hits rank beside the
    # question's. One model call per search, turns included (memory.recall.split).
    ltm_split_questions: bool = False
    # Offline learning: besides the rule forms, keep what the user says of their own life in
    # plain statements ("Pottery is a big part of my life"), close to their words; false keeps
    # only the forms (memory.learning.self_statements).
    ltm_self_statements: bool = True
    # Offline learning: hold every learned fact to the written rules (one claim, no pointer
    # without its referent, no small talk, something specific, no restatement of a live fact;
    # bench/fact_quality/RULES.md, memory.learning.quality); false keeps what the forms read.
    ltm_precise_facts: bool = True
    # Episodes: every user and assistant message, as stored, is embedded through the outbox
    # and searchable across the user's conversations (SearchEpisodes); a turn's context shows
    # at most episode_top_k of them scoring >= episode_score_threshold, in at most
    # episode_context_tokens ("From earlier conversations"). False stores messages without
    # embedding them and recalls none (memory.recall.episodes).
    episodes: bool = True
    episode_top_k: int = 3
    episode_score_threshold: float = 0.6
    episode_context_tokens: int = 600
    # Episode search: each of the ltm_link_seeds best messages brings in the messages said just
    # before and after it in its conversation, at its score times this (0: none).
    episode_neighbour_decay: float = 0.75
    listen_address: str = "127.0.0.1:50051"
    # Where the embedded PostgreSQL keeps its data; empty = the platform default.
    data_dir: str = ""
    # Replace each secret the filter finds in a message (API keys, tokens, passwords, private
    # keys, card numbers) by a typed placeholder such as "[redacted: api key]" before the message
    # is stored; false keeps messages verbatim (secrets never reach long-term memory either way).
    redact_secrets: bool = True
    # Largest message content accepted, in UTF-8 bytes.
    max_message_bytes: int = 65536
    max_messages_per_append: int = 1000
    # Largest request gRPC accepts, in bytes (the whole encoded message); a larger one answers
    # RESOURCE_EXHAUSTED with both sizes. Also the largest response the server sends.
    max_request_bytes: int = 64 * 1024 * 1024
    # Per-scope actor: bounded mailbox, idle eviction.
    mailbox_size: int = 256
    actor_idle_seconds: float = 60.0
    # Upper bound for the rolling summary, as a share of stm_context_tokens.
    summary_budget_ratio: float = 0.25
    # OpenAI-compatible endpoint for the LLM summarizer; empty = offline extractive summarizer.
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    llm_timeout_seconds: float = 30.0
    # OpenAI-compatible /v1/embeddings endpoint; empty = the offline MiniLM model.
    embedding_base_url: str = ""
    embedding_model: str = ""
    embedding_api_key: str = ""
    embedding_dimension: int = 384
    # The shared embedding pool: texts per batch, and how long a batch waits to fill (0: it
    # runs at once, and texts that arrive while the model works make the next batch).
    embedding_batch_size: int = 32
    embedding_max_wait_ms: float = 0.0
    # Recent (model, text) -> vector kept by the pool so a fact is embedded once (about 3.4 KiB
    # each at 384 dimensions); 0 turns the cache off.
    embedding_cache_size: int = 2048
    # The outbox actor: rows per vector-index request, and the poll for other servers' rows.
    outbox_batch_size: int = 256
    outbox_poll_seconds: float = 1.0
    # How long the outbox lets changes gather after the first before it sends them.
    outbox_linger_seconds: float = 0.5
    # Longest wait between retries of a batch the vector index refused.
    outbox_max_backoff_seconds: float = 60.0
    # Where vectors live: "pgvector" (embedded, in this PostgreSQL) or "tigergraph".
    vector_index: str = "pgvector"
    # pgvector only. Whether memory_vectors has an HNSW index (m 32, ef_construction 200) is the
    # database's (index/pgvector.py): pgvector_hnsw is the kind this server records if it is the
    # first to make the table, and is ignored once one is recorded (change it with `python -m
    # memory_server.admin index-kind hnsw|exact`); ef_search is this server's, for searches
    # while the database has the index.
    pgvector_hnsw: bool = False
    pgvector_hnsw_ef_search: int = 800
    tigergraph_host: str = ""
    tigergraph_graph: str = ""
    tigergraph_token: str = ""
    tigergraph_gsql_secret: str = ""
    tigergraph_username: str = ""
    tigergraph_password: str = ""
    tigergraph_tls_verify: bool = True
    # Create the MemoryEmbedding vertex and the Memory_* queries at start when missing.
    tigergraph_install_schema: bool = True
    # How often expired facts are closed and old expired facts purged.
    retention_interval_seconds: float = 3600.0
    db_pool_min_size: int = 2
    db_pool_max_size: int = 10
    # Longest wait for a free PostgreSQL connection; past it the call answers UNAVAILABLE.
    db_pool_wait_seconds: float = 10.0
    # Budget for one RPC when the client sets no deadline.
    request_timeout_seconds: float = 30.0
    shutdown_grace_seconds: float = 10.0
    reflection: bool = True
    # Bearer tokens a caller must send as `authorization: Bearer <token>` (comma-separated, so
    # one can be rotated without downtime); empty = no authentication. Health stays open.
    auth_token: str = ""
    # TLS: certificate chain and private key (PEM files). With tls_client_ca_file, callers must
    # present a certificate signed by that CA (mutual TLS).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    # Prometheus metrics over HTTP (GET /metrics, GET /healthz); empty = off.
    metrics_address: str = ""
    # An OpenTelemetry server span per RPC (needs the opentelemetry API; the SDK and exporter
    # are configured by the deployment, e.g. OTEL_EXPORTER_OTLP_ENDPOINT).
    tracing: bool = False
    log_level: str = "INFO"
    # text (for people) or json (one object per line, for log pipelines).
    log_format: str = "text"

    @property
    def summary_max_tokens(self) -> int:
        return int(self.stm_context_tokens * self.summary_budget_ratio)


# The top-level sections of GraphRAG's configs/server_config.json (and what its
# common/config.py reads) that are not ours.
GRAPHRAG_SECTIONS = frozenset({"db_config", "graphrag_config", "llm_config", "chat_config"})


def _field_types() -> dict[str, type]:
    types = {"bool": bool, "int": int, "float": float, "str": str}
    return {f.name: types[str(f.type)] for f in fields(Settings)}


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SettingsError(f"config: file not found: {path}") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise SettingsError(f"config: cannot read {path}: {exc}") from exc
    if not isinstance(document, dict):
        raise SettingsError(f"config: {path} must hold a JSON object")
    # GraphRAG's server_config.json keeps ours under "memory_config" and GraphRAG's own sections
    # beside it, which are GraphRAG's business: only memory_config is read. A GraphRAG file
    # without memory_config gives no settings (the defaults apply). A file with none of
    # GraphRAG's sections is taken as the memory_config object itself.
    if "memory_config" in document:
        section = document["memory_config"]
    elif GRAPHRAG_SECTIONS.intersection(document):
        section = {}
    else:
        section = document
    if not isinstance(section, dict):
        raise SettingsError(f"memory_config: expected an object in {path}")
    return section


def load_settings(
    *,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    types = _field_types()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(key: str, raw: Any, source: str) -> None:
        if key not in types:
            raise SettingsError(f"{key} (from {source}): unknown setting")
        values[key] = coerce(key, raw, types[key], source)
        sources[key] = source

    if config_path is not None:
        for key, raw in _read_config_file(config_path).items():
            put(key, raw, f"{config_path}:memory_config")
    for name, raw in (environ or {}).items():
        if name.startswith(ENV_PREFIX) and name != ENV_PREFIX + "CONFIG":
            put(name[len(ENV_PREFIX) :].lower(), raw, f"environment {name}")
    for key, raw in (overrides or {}).items():
        put(key, raw, f"--{key.replace('_', '-')}")
    settings = dataclasses.replace(Settings(), **values)
    validate(settings, sources)
    return settings


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphrag-memory-server",
        description="gRPC memory service for GraphRAG. Settings: defaults < --config file "
        f"(memory_config) < {ENV_PREFIX}* environment < flags.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help=f"GraphRAG server_config.json (or {ENV_PREFIX}CONFIG)",
    )
    for f in fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        # Values stay strings here and go through the same coercion as the other sources.
        parser.add_argument(flag, dest=f.name, default=None, metavar=str(f.type).upper())
    return parser


def settings_from_cli(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Settings:
    args = argument_parser().parse_args(argv)
    config = args.config
    if config is None and environ.get(ENV_PREFIX + "CONFIG"):
        config = Path(environ[ENV_PREFIX + "CONFIG"])
    overrides = {
        f.name: getattr(args, f.name) for f in fields(Settings) if getattr(args, f.name) is not None
    }
    return load_settings(config_path=config, environ=environ, overrides=overrides)

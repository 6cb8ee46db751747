"""One client for OpenAI-compatible HTTP endpoints (OpenAI, vLLM, llama.cpp server, Ollama,
text-embeddings-inference, ...): budgets, retries, error mapping. The adapters in embedding/,
llm/ and extraction/ use it; the domain never does."""

from memory_server.openai_http.chat import ChatClient, chat_body, completion_text
from memory_server.openai_http.client import EndpointError, OpenAICompatibleClient
from memory_server.openai_http.retry import NO_RETRIES, RETRY_STATUSES, RetryPolicy

__all__ = [
    "NO_RETRIES",
    "RETRY_STATUSES",
    "ChatClient",
    "EndpointError",
    "OpenAICompatibleClient",
    "RetryPolicy",
    "chat_body",
    "completion_text",
]

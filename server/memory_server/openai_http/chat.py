"""Chat completions over the shared client: `POST {base_url}/chat/completions`, the reply's
`choices[0].message.content`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_server.openai_http.client import EndpointError, OpenAICompatibleClient


def chat_body(
    model: str,
    messages: Sequence[dict[str, str]],
    *,
    max_tokens: int,
    json_mode: bool = False,
    temperature: float = 0.0,
) -> dict[str, Any]:
    """The request body; `json_mode` adds `response_format: json_object` (OpenAI, vLLM,
    llama.cpp server and Ollama accept it; switch it off for endpoints that reject the field)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def completion_text(payload: Any, url: str) -> str:
    """`choices[0].message.content` of a chat.completion answer, stripped; EndpointError when
    there is none."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise EndpointError(f"{url}: no choices[0].message.content") from None
    if not isinstance(content, str) or not content.strip():
        raise EndpointError(f"{url}: empty content")
    return content.strip()


class ChatClient(OpenAICompatibleClient):
    """Chat completions from an OpenAI-compatible base URL; the model is named per call, as
    in the protocol."""

    @property
    def completions_url(self) -> str:
        return self.url("chat/completions")

    async def complete(
        self,
        model: str,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        json_mode: bool = False,
        budget_s: float | None = None,
    ) -> str:
        """`model`'s reply to `messages` (temperature 0)."""
        body = chat_body(model, messages, max_tokens=max_tokens, json_mode=json_mode)
        payload = await self.post("chat/completions", body, budget_s=budget_s)
        return completion_text(payload, self.completions_url)

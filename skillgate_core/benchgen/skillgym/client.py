"""A minimal OpenAI-compatible chat-completions client (urllib, no SDK).

    client = ChatClient(base_url="http://127.0.0.1:8000/v1", model="deepseek-chat", api_key="...")
    reply = client.chat([{"role": "system", "content": "..."}, {"role": "user", "content": "..."}])
    reply.content, reply.prompt_tokens, reply.completion_tokens

POST {base_url}/chat/completions with {model, messages, temperature, max_tokens}; the reply's
`choices[0].message.content` and `usage` are read. 429 and 5xx are retried with backoff; any other
failure raises ChatError naming the URL, the status and the start of the body.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ChatClient", "ChatError", "ChatReply"]


class ChatError(RuntimeError):
    """The endpoint failed or answered something that is not a chat completion."""


@dataclass(frozen=True)
class ChatReply:
    """One completion."""

    content: str
    """The assistant message text."""
    prompt_tokens: int
    """usage.prompt_tokens (0 when the endpoint reports none)."""
    completion_tokens: int
    """usage.completion_tokens (0 when the endpoint reports none)."""
    seconds: float
    """Wall time of the request, retries included."""


@dataclass(frozen=True)
class ChatClient:
    """Where and how to ask."""

    base_url: str
    """API root, e.g. http://127.0.0.1:8000/v1 (the path /chat/completions is appended)."""
    model: str
    """Model name sent with every request."""
    api_key: str = ""
    """Bearer token ("" sends no Authorization header)."""
    temperature: float = 0.2
    """Sampling temperature."""
    max_tokens: int = 8192
    """Completion token cap per request."""
    timeout_sec: float = 300.0
    """Per-request timeout."""
    retries: int = 3
    """Extra attempts after a 429 / 5xx / connection failure."""

    def chat(self, messages: Sequence[dict[str, str]]) -> ChatReply:
        url = self.base_url.rstrip("/") + "/chat/completions"
        body = json.dumps({"model": self.model, "messages": list(messages), "temperature": self.temperature,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        start = time.perf_counter()
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_sec) as response:
                    data = json.loads(response.read().decode("utf-8"))
                break
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300]
                if (exc.code == 429 or exc.code >= 500) and attempt < self.retries:
                    time.sleep(min(30.0, 0.5 * 2**attempt))
                    continue
                raise ChatError(f"{url}: HTTP {exc.code}: {detail}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt < self.retries:
                    time.sleep(min(30.0, 0.5 * 2**attempt))
                    continue
                raise ChatError(f"{url}: {exc}") from exc
            except json.JSONDecodeError as exc:
                raise ChatError(f"{url}: the reply is not JSON: {exc}") from exc
        try:
            content = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise ChatError(f"{url}: expected choices[0].message.content in the reply, got {str(data)[:300]}") from exc
        usage = data.get("usage") or {}
        return ChatReply(content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                         time.perf_counter() - start)

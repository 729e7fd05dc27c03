"""SkillGym's builder/reviewer model: an OpenAI-compatible endpoint with fixed sampling settings.

    client = ChatClient(base_url="http://127.0.0.1:8000/v1", model="deepseek-chat", api_key="...")
    turn = client.chat([{"role": "system", "content": "..."}, {"role": "user", "content": "..."}])
    turn.text, turn.prompt_tokens, turn.completion_tokens

The request, its retries and the reading of the reply are the one client's,
skillgate_core.policy.openai_chat.chat_completion: POST {base_url}/chat/completions with {model,
messages, temperature, max_tokens}; a failure raises its EndpointError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillgate_core.policy.openai_chat import ChatTurn, OpenAIEndpoint, chat_completion

__all__ = ["ChatClient"]


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
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

    def __post_init__(self) -> None:
        _ = self.endpoint  # refuses a bad base_url, model, timeout or retries now, not at the first call

    @property
    def endpoint(self) -> OpenAIEndpoint:
        return OpenAIEndpoint(base_url=self.base_url, model=self.model, timeout_s=self.timeout_sec,
                              retries=self.retries)

    def chat(self, messages: Sequence[Mapping[str, str]]) -> ChatTurn:
        """One completion of `messages`; EndpointError when the endpoint fails."""
        return chat_completion(self.endpoint, messages, temperature=self.temperature, max_tokens=self.max_tokens,
                               api_key=self.api_key)

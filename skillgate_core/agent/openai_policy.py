"""A model served behind an OpenAI-compatible endpoint as a Policy: for evaluation, and as the
`collect` teacher (CollectConfig.teacher = "openai").

Each active episode's conversation (system prompt with the tool schemas as text, task, earlier
turns, observations as `<tool_response>` user messages) is sent as it stands; the requests of one
lockstep turn run concurrently (endpoint.concurrency). The reply is kept as text; it is tokenized
once with the policy tokenizer (text + `<|im_end|>` when the turn stopped, as a demonstration turn
is), because the episode loop counts context and records token ids. It has no log-probs.

    policy = OpenAIPolicy(OpenAIEndpoint("http://127.0.0.1:8000/v1", "qwen"), tokenizer,
                          temperature=1.0, top_p=1.0, max_new_tokens=1024, seed_of=lambda v: 7)
    run_episodes(specs, policy, tokenizer, EpisodeConfig())
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from skillgate_core.agent.episode import EpisodeView
from skillgate_core.agent.policies import turn_token_ids
from skillgate_core.agent.seeded_policy import turn_seed
from skillgate_core.policy.local_sampler import Completion
from skillgate_core.policy.openai_chat import ChatTurn, EndpointError, OpenAIEndpoint, chat_completion

__all__ = ["OpenAIPolicy"]


class OpenAIPolicy:
    """Turns from an OpenAI-compatible endpoint (module docstring)."""

    def __init__(self, endpoint: OpenAIEndpoint, tokenizer: Any, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 1024, seed_of: Callable[[EpisodeView], int] | None = None,
                 name: str | None = None) -> None:
        self.endpoint, self.tokenizer = endpoint, tokenizer
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.seed_of = seed_of
        self.name = name or endpoint.model
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()

    def _ask(self, view: EpisodeView) -> ChatTurn:
        seed = turn_seed(self.seed_of(view), view.turn) if self.seed_of is not None else None
        turn = chat_completion(self.endpoint, view.messages, temperature=self.temperature, top_p=self.top_p,
                               max_tokens=max(1, min(view.max_new_tokens, self.max_new_tokens)), seed=seed)
        with self._lock:
            self.usage["requests"] += 1
            self.usage["prompt_tokens"] += turn.prompt_tokens
            self.usage["completion_tokens"] += turn.completion_tokens
        return turn

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        """One turn per view. An endpoint failure (EndpointError: unreachable, too large, too slow,
        malformed) is that view's Completion.error; a reply longer than the view's budget is cut to
        it (finish length), whatever the server made of max_tokens."""
        if not views:
            return []
        # Daemon threads, not a pool: a SIGTERM'd process exits without waiting for a dripping server
        # (each request still ends at endpoint.deadline_s).
        gate = threading.Semaphore(self.endpoint.concurrency)
        futures: list[Future[ChatTurn]] = [Future() for _ in views]

        def ask(view: EpisodeView, future: Future[ChatTurn]) -> None:
            with gate:
                try:
                    future.set_result(self._ask(view))
                except BaseException as exc:  # handed to the caller, which raises all but EndpointError
                    future.set_exception(exc)

        for view, future in zip(views, futures, strict=True):
            threading.Thread(target=ask, args=(view, future), name="openai-policy", daemon=True).start()
        out = []
        for view, future in zip(views, futures, strict=True):
            try:
                turn = future.result()
            except EndpointError as exc:
                out.append(Completion((), (), "", "stop", error=str(exc)))
                continue
            budget = max(1, min(view.max_new_tokens, self.max_new_tokens))
            if turn.finish == "stop":
                ids = turn_token_ids(self.tokenizer, turn.text)
            else:  # cut by max_tokens: no terminator was produced
                ids = list(self.tokenizer(turn.text, add_special_tokens=False)["input_ids"])
            if len(ids) > budget:  # the server ignored max_tokens: keep what the budget allows
                ids = ids[:budget]
                out.append(Completion(tuple(ids), (), self.tokenizer.decode(ids, skip_special_tokens=True), "length"))
                continue
            out.append(Completion(tuple(ids), (), turn.text, turn.finish))
        return out

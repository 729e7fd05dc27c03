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

A hosted model often has no tokenizer one can load. With tokenizer None the tokens are counted from
the endpoint's `usage` instead (USAGE_COUNTING_NOTE says what is then not measured): a turn's ids are
`completion_tokens` placeholders (USAGE_ID), the turn carries the server's count of the context it was
generated from (Completion.context_tokens), and the episodes run with USAGE_COUNTS as their tokenizer
(it tokenizes nothing):

    policy = OpenAIPolicy(endpoint, None)
    run_episodes(specs, policy, USAGE_COUNTS, EpisodeConfig())

A request still unanswered after endpoint.slow_request_s is reported once per policy (a warning
line); a request that times out fails its turn and is never sent again (policy/openai_chat.py).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

from skillgate_core.agent.episode import EpisodeView
from skillgate_core.agent.policies import turn_token_ids
from skillgate_core.agent.seeded_policy import turn_seed
from skillgate_core.policy.local_sampler import Completion
from skillgate_core.policy.openai_chat import ChatTurn, EndpointError, OpenAIEndpoint, chat_completion

__all__ = ["USAGE_COUNTING_NOTE", "USAGE_COUNTS", "USAGE_ID", "OpenAIPolicy", "UsageCounts"]

USAGE_ID = -1
"""The placeholder id of a token counted from the endpoint's usage: no tokenizer gave it an id."""
USAGE_COUNTING_NOTE = (
    "token counts are the endpoint's usage (no local tokenizer): the context limit is checked after each "
    "reply from the server's count, not before a request is sent (a tool observation can take a request "
    "past the protocol's context size; the server's own limit then applies), no token ids are recorded, "
    "and response_tokens counts the model's turns only (observation tokens are not counted)")
"""What an evaluation of an endpoint without a tokenizer does not measure (printed and in its summary)."""


class UsageCounts:
    """The episodes' tokenizer when a served model has none here: it tokenizes nothing (the prompt and
    the observations get no ids; the policy's turns are counted from the server's usage)."""

    chat_template = "(rendered by the server)"
    name_or_path = "endpoint usage"

    def apply_chat_template(self, messages: object, **kwargs: object) -> list[int]:
        return []

    def __call__(self, text: str, **kwargs: object) -> dict[str, list[int]]:
        return {"input_ids": []}

    def decode(self, ids: object, **kwargs: object) -> str:
        return ""


USAGE_COUNTS = UsageCounts()


class OpenAIPolicy:
    """Turns from an OpenAI-compatible endpoint (module docstring)."""

    def __init__(self, endpoint: OpenAIEndpoint, tokenizer: Any | None, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 1024, seed_of: Callable[[EpisodeView], int] | None = None,
                 name: str | None = None) -> None:
        self.endpoint, self.tokenizer = endpoint, tokenizer
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.seed_of = seed_of
        self.name = name or endpoint.model
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()
        self._slow_reported = False

    def _report_slow(self, waiting: int, asked: int) -> None:
        """One warning line the first time requests are slow (endpoint.slow_request_s), then silence."""
        if self._slow_reported:
            return
        self._slow_reported = True
        e = self.endpoint
        warnings.warn(f"{e.url}: {waiting} of {asked} requests still unanswered after {e.slow_request_s:g} s "
                      f"(request timeout {e.timeout_s:g} s: a request past it fails its trial and is not sent "
                      "again; reported once)", stacklevel=3)

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
        if not self._slow_reported:
            _, waiting = wait(futures, timeout=self.endpoint.slow_request_s)
            if waiting:
                self._report_slow(len(waiting), len(futures))
        out = []
        for view, future in zip(views, futures, strict=True):
            try:
                turn = future.result()
            except EndpointError as exc:
                out.append(Completion((), (), "", "stop", error=str(exc)))
                continue
            budget = max(1, min(view.max_new_tokens, self.max_new_tokens))
            if self.tokenizer is None:  # counted from usage: the server's counts, placeholder ids
                cut = turn.completion_tokens > budget  # the server ignored max_tokens: the text cannot be cut here
                out.append(Completion((USAGE_ID,) * min(turn.completion_tokens, budget), (), turn.text,
                                      "length" if cut else turn.finish, context_tokens=turn.prompt_tokens))
                continue
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

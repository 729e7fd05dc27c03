"""A local model as an evaluation policy: every episode samples from its own seeded stream.

Each turn of an episode is sampled with seed = mix(seed_of(episode), turn) by
policy.seeded_sampler, so what an episode does depends on its own seed only, never on which
episodes share its lockstep batch or in what order batches ran (an interrupted evaluation resumed
later reproduces the same trials). Each episode gets its own turn budget (the room its context has).

    policy = SeededPolicy(model, tok, SamplingConfig(temperature=1.0, max_new_tokens=1024),
                          seed_of=lambda view: trial_seed(70, view.spec.task.task_id, view.spec.repeat))
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from skillgate_core.agent.episode import EpisodeView
from skillgate_core.policy.local_sampler import Completion, SamplingConfig
from skillgate_core.policy.seeded_sampler import sample_seeded

__all__ = ["SeededPolicy", "turn_seed"]


def turn_seed(episode_seed: int, turn: int) -> int:
    """The seed of one turn of an episode (63 bits)."""
    return int(hashlib.sha256(f"turn::{episode_seed}::{turn}".encode()).hexdigest()[:15], 16)


class SeededPolicy:
    """Batched sampling from a local model with one seeded stream per episode (module docstring)."""

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingConfig,
                 seed_of: Callable[[EpisodeView], int], name: str = "local") -> None:
        self.model, self.tokenizer, self.sampling, self.seed_of, self.name = model, tokenizer, sampling, seed_of, name

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        seeds = [turn_seed(self.seed_of(v), v.turn) for v in views]
        limits = [max(1, min(v.max_new_tokens, self.sampling.max_new_tokens)) for v in views]
        return sample_seeded(self.model, self.tokenizer, [v.context_ids for v in views], seeds, self.sampling, limits)

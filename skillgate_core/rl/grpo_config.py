"""The `grpo` stage's config: one frozen dataclass, every field documented where it is declared.

Seed values (METHOD.md 6-7, marked "seed") are the published setting; the defaults here are sized for
the embedded default (a tiny model on a 2-core CPU). Recipes `rl-train` and `rl.<profile>` set the
profile; `deployments/recipes/*.toml` hold the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skillgate_core.credit.groups import FORCE_AFTER_GROUPS, FORCE_AFTER_SAMPLES
from skillgate_core.rl.loss import SEED_BETA, SEED_CLIP_HIGH, SEED_CLIP_LOW
from skillgate_core.rl.profiles import get_profile

__all__ = ["GRPOConfig", "RolloutSource"]

RolloutSource = Literal["policy", "teacher"]
"""policy = the colocated replica samples (on-policy GRPO); teacher = the reference teacher with
selection noise plays the episodes and the policy is trained on them off-policy (the old log-probs
are the engine's own, so the first-step ratio is 1). `teacher` exists for CPU smoke runs, where a
tiny model solves nothing and every group would be rejected as zero-variance."""


@dataclass(frozen=True)
class GRPOConfig:
    """GRPO with the SkillGate selector credit (METHOD.md 4-7) on Ray Train + DeepSpeed ZeRO-3."""

    profile: str = "selector_clean_oracle_action_credit"
    """Training profile (METHOD.md 7); rl-train = SkillGate."""
    steps: int = 2
    """Optimizer steps of this experiment (a resume continues to this total)."""
    prompts_per_step: int = 2
    """Accepted groups per optimizer step, over all workers (seed 16)."""
    group_size: int = 4
    """G, rollouts per prompt (seed 8)."""
    chunk_groups: int = 4
    """Groups converted together into token weights: a conversion chunk (seed 4 = 32 episodes)."""
    max_rejected_groups: int = 128
    """Per worker and step: after this many rejected groups the step trains on what was accepted
    (the profiles that never force acceptance could otherwise resample forever)."""
    force_after_groups: int = FORCE_AFTER_GROUPS
    """no_skill / mixed_task_reward: rejected groups in a step after which zero variance is waived
    (seed 64; counted per worker)."""
    force_after_samples: int = FORCE_AFTER_SAMPLES
    """... or rejected samples in a step (seed 300; counted per worker)."""
    num_workers: int = 2
    """Ray Train workers (one per GPU on a GPU machine)."""
    use_gpu: bool = False
    """NCCL + CUDA when true, gloo + CPU otherwise."""
    rollout_source: RolloutSource = "policy"
    """Who plays the episodes: the policy's replica, or the noisy teacher (see RolloutSource)."""
    teacher_misleading_rate: float = 0.3
    """Teacher rollouts: probability of reading a misleading skill first."""
    teacher_no_read_rate: float = 0.2
    """Teacher rollouts: probability of reading no skill."""
    learning_rate: float = 1e-6
    """Adam learning rate, constant (seed 1e-6)."""
    weight_decay: float = 0.1
    """Adam weight decay (seed 0.1)."""
    adam_beta1: float = 0.9
    """Adam beta1 (seed 0.9)."""
    adam_beta2: float = 0.98
    """Adam beta2 (seed 0.98)."""
    grad_clip: float = 1.0
    """Gradient-norm clip (0 = off)."""
    beta: float = SEED_BETA
    """KL coefficient (seed 3e-5); 0 skips the reference model."""
    clip_low: float = SEED_CLIP_LOW
    """Lower ratio clip range (seed 0.2)."""
    clip_high: float = SEED_CLIP_HIGH
    """Upper ratio clip range (seed 0.28)."""
    selector_coef: float = -1.0
    """lambda; -1 takes the profile's own value (0.2 for the selector profiles, 0 otherwise)."""
    temperature: float = 1.0
    """Sampling temperature; the trainer divides logits by the same value."""
    max_new_tokens: int = 96
    """Longest assistant turn."""
    max_turns: int = 4
    """Assistant turns per episode (seed 30)."""
    max_context_tokens: int = 8192
    """Prompt + response tokens per episode."""
    episode_wall_clock_s: float = 300.0
    """Seconds per episode (seed 850)."""
    micro_batch_tokens: int = 16384
    """Token budget of one packed micro-batch."""
    backend: str = "bwrap"
    """Sandbox backend for the episodes (auto, docker, bwrap)."""
    sandbox_workers: int = 4
    """Threads per Ray worker running sandboxes (tool calls, starts, verification)."""
    checkpoint_every: int = 1
    """Save a checkpoint every this many steps (and at the last step)."""
    seed: int = 0
    """Seed of the prompt order and of sampling."""
    bf16: bool = False
    """bf16 weights and compute (GPU); float32 on CPU."""
    zero_stage: int = 3
    """DeepSpeed ZeRO stage."""
    max_failures: int = 0
    """Ray Train FailureConfig.max_failures: worker-group restarts from the last checkpoint."""
    launcher: Literal["ray", "process"] = "ray"
    """ray = Ray Train TorchTrainer with num_workers workers (a local Ray, or $RAY_ADDRESS's cluster);
    process = this process alone (world size 1; debugging)."""
    experiment_id: str = ""
    """The experiment this run starts ('' = grpo-PROFILE-HASH of the config and inputs)."""
    resume_experiment: str = ""
    """Resume this experiment from its latest checkpoint in a new segment ('' = a fresh run)."""

    def __post_init__(self) -> None:
        get_profile(self.profile)  # an unknown profile fails here, naming the valid ones
        positive = ("steps", "prompts_per_step", "group_size", "chunk_groups", "num_workers", "max_new_tokens",
                    "max_turns", "max_context_tokens", "micro_batch_tokens", "checkpoint_every",
                    "sandbox_workers")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"grpo.{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"grpo.group_size must be >= 2 (a group of one has no advantage), got {self.group_size}")
        if self.prompts_per_step % self.num_workers:
            raise ValueError(
                f"grpo.prompts_per_step ({self.prompts_per_step}) must be a multiple of grpo.num_workers "
                f"({self.num_workers}): each worker rolls out an equal share"
            )
        for name in ("learning_rate", "temperature", "episode_wall_clock_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"grpo.{name} must be > 0, got {getattr(self, name)}")
        for name in ("weight_decay", "beta", "grad_clip", "max_rejected_groups", "max_failures",
                     "force_after_groups", "force_after_samples"):
            if getattr(self, name) < 0:
                raise ValueError(f"grpo.{name} must be >= 0, got {getattr(self, name)}")
        if not (0 < self.clip_low < 1 and self.clip_high > 0):
            raise ValueError(f"grpo.clip_low must be in (0, 1) and clip_high > 0, got {self.clip_low}, {self.clip_high}")
        if self.selector_coef < 0 and self.selector_coef != -1.0:
            raise ValueError(f"grpo.selector_coef must be >= 0 (or -1 for the profile's own), got {self.selector_coef}")
        if not (0 <= self.teacher_misleading_rate and 0 <= self.teacher_no_read_rate
                and self.teacher_misleading_rate + self.teacher_no_read_rate <= 1):
            raise ValueError("grpo.teacher_misleading_rate and teacher_no_read_rate must be >= 0 and sum to <= 1")
        if self.launcher == "process" and self.num_workers != 1:
            raise ValueError(f"grpo.launcher = 'process' runs one worker; got num_workers = {self.num_workers}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"grpo.zero_stage must be 0-3, got {self.zero_stage}")

    @property
    def reusable(self) -> bool:
        """A resume is never answered from the stage cache (skillgate_core.pipeline): it always trains."""
        return not self.resume_experiment

    @property
    def lambda_(self) -> float:
        """The selector coefficient in force: the override, or the profile's own."""
        return get_profile(self.profile).selector_coef if self.selector_coef == -1.0 else self.selector_coef

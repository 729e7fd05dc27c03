"""The `grpo` stage's config: one frozen dataclass, every field documented where it is declared.

Seed values (docs/method.md 6-7, marked "seed") are the published setting; the defaults here are sized for
the embedded default (a tiny model on a 2-core CPU). Recipes `rl-train` and `rl.<profile>` set the
profile; `deployments/recipes/*.toml` hold the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from skillgate_core.base.config_ranges import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Probability,
    Range,
    check_ranges,
)
from skillgate_core.credit.groups import FORCE_AFTER_GROUPS, FORCE_AFTER_SAMPLES
from skillgate_core.envs.backend_registry import Backend
from skillgate_core.policy.local_sampler import SamplerKind
from skillgate_core.policy.sglang_client import worker_sglang_urls
from skillgate_core.rl.engine.zero_choice import LORA_STAGE3_REFUSED, ZeroStage
from skillgate_core.rl.loss_seeds import SEED_BETA, SEED_CLIP_HIGH, SEED_CLIP_LOW
from skillgate_core.rl.profiles import get_profile

__all__ = ["VARIANTS", "GRPOConfig", "RolloutSource"]

VARIANTS = ("selector_on_zero_variance", "identity_first_mention")
"""The labelled variants (GRPOConfig bool fields of those names): ablations beside the method, never
its default; a run that sets one carries its name (`GRPOConfig.variant`) in its experiment id, its
metrics rows, its export lineage and the stage output."""

RolloutSource = Literal["policy", "teacher", "sglang"]
"""policy = the colocated replica samples (on-policy GRPO); sglang = SGLang servers sample (server
mode, CUDA machines: infra/sglang_server.sh starts one) and rank 0 pushes the weights to them after
every optimizer step (rl/sglang_sync.py). Which servers is the worker's configuration
(SKILLGATE_SGLANG_URLS where it runs), and the weights go under the run's segment: neither is a run
parameter (a run's parameters are anyone's who can start one; docs/security.md); teacher = the reference teacher with selection noise plays
the episodes and the policy is trained on them off-policy (the old log-probs are the engine's own,
so the first-step ratio is 1). `teacher` exists for CPU smoke runs, where a tiny model solves
nothing and every group would be rejected as zero-variance."""


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class GRPOConfig:
    """GRPO with the SkillGate selector credit (docs/method.md 4-7) on Ray Train + DeepSpeed ZeRO."""

    profile: str = "selector_clean_oracle_action_credit"
    """Training profile (docs/method.md 7); rl-train = SkillGate."""
    steps: PositiveInt = 2
    """Optimizer steps of this experiment (a resume continues to this total)."""
    prompts_per_step: PositiveInt = 2
    """Accepted groups per optimizer step, over all workers (seed 16)."""
    group_size: Annotated[int, Range(ge=2)] = 4
    """G, rollouts per prompt (seed 8)."""
    chunk_groups: PositiveInt = 4
    """Groups converted together into token weights: a conversion chunk (seed 4 = 32 episodes)."""
    draw_ahead: Annotated[float, Range(ge=1)] = 1.0
    """Groups played per group still missing in a rollout round (rl.rollouts). 1: a round plays exactly the
    missing groups, and each rejection costs another round (a whole episode's turns of latency). More: a round
    plays that many times the missing groups in one batch and judges them in draw order until the worker has
    its share; the groups past the last one judged are discarded unjudged and handed back to the prompt
    stream, so the next step plays them first, with its own weights. The accepted groups, the rejections and
    the forcing are those of 1 (only compute is spent; metrics: groups_discarded). The safety cap is checked
    between rounds, so a round may pass it by what it plays."""
    max_rejected_groups: NonNegativeInt = 128
    """The safety cap, the same for every profile: per worker and step, after this many rejected groups
    the step trains on what was accepted (nothing accepted: the step takes no optimizer step, and the
    metrics say so: optimizer_step_taken, optimizer_steps). The profiles that never force acceptance
    keep drawing until then; the forcing profiles force first (it must lie above the forcing point, so
    no arm gives up where the method says it forces)."""
    force_after_groups: PositiveInt = FORCE_AFTER_GROUPS
    """no_skill / mixed_task_reward: rejected groups in a step after which zero variance is waived
    (seed 64; counted per worker)."""
    force_after_samples: PositiveInt = FORCE_AFTER_SAMPLES
    """... or rejected samples in a step (seed 300; counted per worker)."""
    selector_on_zero_variance: bool = False
    """Labelled variant, an ablation and never the method's default (its runs carry the label
    `selector_on_zero_variance`): a two-stream profile keeps a zero-variance group for the SELECTOR
    stream only (task advantages 0) when its selector utilities vary, i.e. some attributed read has a
    nonzero selector advantage. Measured reason: with a policy that rarely succeeds almost every group
    is zero-variance and the selector arms barely train."""
    identity_first_mention: bool = False
    """Labelled variant, an ablation and never the method's default (label `identity_first_mention`):
    a read action's identity tokens are the tokens of the FIRST mention of its skill name in that turn
    (in <skill_reasoning> or in the call), not the name inside the call; they leave the task stream like
    the call tokens. Measured reason: after a reasoning that names the skill, the copy inside the call
    has p ~ 1, so a policy gradient there is ~ 0; the choice is made at the first mention."""
    num_workers: PositiveInt = 2
    """Ray Train workers (one per GPU on a GPU machine)."""
    use_gpu: bool = False
    """NCCL + CUDA when true, gloo + CPU otherwise."""
    rollout_source: RolloutSource = "policy"
    """Who plays the episodes: the policy's replica, SGLang servers, or the noisy teacher (see RolloutSource)."""
    sglang_timeout_s: PositiveFloat = 600.0
    """rollout_source = sglang: seconds one /generate or weight-update call may take."""
    teacher_misleading_rate: Probability = 0.3
    """Teacher rollouts: probability of reading a misleading skill first."""
    teacher_no_read_rate: Probability = 0.2
    """Teacher rollouts: probability of reading no skill."""
    learning_rate: PositiveFloat = 1e-6
    """Adam learning rate, constant (seed 1e-6)."""
    weight_decay: NonNegativeFloat = 0.1
    """Adam weight decay (seed 0.1)."""
    adam_beta1: Annotated[float, Range(ge=0, lt=1)] = 0.9
    """Adam beta1 (seed 0.9)."""
    adam_beta2: Annotated[float, Range(ge=0, lt=1)] = 0.98
    """Adam beta2 (seed 0.98)."""
    grad_clip: NonNegativeFloat = 1.0
    """Gradient-norm clip (0 = off)."""
    beta: NonNegativeFloat = SEED_BETA
    """KL coefficient (seed 3e-5); 0 skips the reference model."""
    clip_low: Annotated[float, Range(gt=0, lt=1)] = SEED_CLIP_LOW
    """Lower ratio clip range (seed 0.2)."""
    clip_high: PositiveFloat = SEED_CLIP_HIGH
    """Upper ratio clip range (seed 0.28)."""
    selector_coef: Annotated[float, Range(ge=-1)] = -1.0
    """lambda; -1 takes the profile's own value (0.2 for the selector profiles, 0 otherwise)."""
    temperature: PositiveFloat = 1.0
    """Sampling temperature; the trainer divides logits by the same value."""
    sampler: SamplerKind = "auto"
    """rollout_source = policy: the replica's sampler: hf (transformers generate), static (static KV
    cache + CUDA-graph decode step, policy.static.sampler), auto = static on GPU, hf on CPU."""
    static_shapes: bool = False
    """With the static sampler, pad every generate call of a worker to one shape (its largest round's
    episodes, a cache of max_context_tokens), so multi-turn rollouts compile one decode graph instead of
    one per (batch, length) bucket met (policy.static StaticSamplerConfig min_batch / min_cache_length). For
    agent rollouts; a single-turn workload of short prompts decodes faster in its own smaller buckets."""
    max_new_tokens: PositiveInt = 96
    """Longest assistant turn."""
    max_turns: PositiveInt = 4
    """Assistant turns per episode (seed 30)."""
    max_context_tokens: PositiveInt = 8192
    """Prompt + response tokens per episode."""
    episode_wall_clock_s: PositiveFloat = 300.0
    """Seconds per episode (seed 850)."""
    micro_batch_tokens: PositiveInt = 16384
    """Token budget of one packed micro-batch."""
    old_logprobs: Literal["auto", "recompute"] = "auto"
    """Where the clipped ratio's old log-probs come from. Each rollout batch takes ONE optimizer step, after
    every micro-batch's backward, so at each loss the policy is still the one that sampled: rho = 1 by
    construction. auto: the current log-probs, detached (one no-grad forward per micro-batch fewer), unless
    the policy has active dropout (two forwards differ), where it recomputes; recompute: always the extra
    no-grad forward first (the trainer before 2026-12-07)."""
    backend: Backend = "bwrap"
    """Sandbox backend for the episodes: auto or one of envs/backend_registry.py."""
    sandbox_workers: PositiveInt = 4
    """Threads per Ray worker running sandboxes (tool calls, starts, verification)."""
    overlap_sandbox: bool = True
    """Start each round's sandboxes while its first turn generates, and verify an ended episode while the
    others play (agent.episode.EpisodeConfig.overlap_sandbox). False: the lockstep loop, every start before
    the first turn and every verification after the last (the A/B of docs/gpu.md 5). The same episodes
    either way; only where the waits fall differs."""
    checkpoint_every: PositiveInt = 1
    """Save a checkpoint every this many steps (and at the last step)."""
    probe_every: NonNegativeInt = 0
    """Every this many steps (and before the first), rank 0 probes the replica on a fixed held-in sample of
    the training prompts (agent.selection_scores.probe_training_rows: renamed as shown, the teacher's
    evidence) and logs `probe/heldin_oracle_given_cluster` and `probe/heldin_cluster_rank1_rate`: a
    low-noise learning curve of the selection, free of sampling. 0: off. Needs rollout_source "policy"."""
    probe_tasks: PositiveInt = 32
    """Training prompts in that held-in sample (a seeded draw over the table, the same at every step)."""
    seed: NonNegativeInt = 0
    """Seed of the prompt order and of sampling."""
    bf16: bool = False
    """bf16 weights and compute (GPU); float32 on CPU."""
    zero_stage: ZeroStage = "auto"
    """DeepSpeed ZeRO stage 0..3, or auto: picked when the engine is built from the model size, the number of
    workers and the free GPU memory (rl.engine.zero_choice; stage 3 on CPU). "auto" is what the config digest
    hashes; the stage it resolved to and why are in the run's metrics (zero_stage_resolved,
    zero_stage_reason). A resumed run keeps the stage its checkpoint was written with."""
    lora_rank: NonNegativeInt = 0
    """0: train every weight. r > 0: train LoRA adapters of rank r on the attention and MLP projections
    (rl.engine.lora_adapters.LORA_TARGETS) with the base frozen: the ZeRO stage is then at most 2 (auto's 3
    becomes 2, the reason in zero_stage_reason; a zero_stage of 3 is refused), a checkpoint holds only the
    adapters and their Adam state, and the replica, the SGLang servers and the export get the merged plain
    model (W + B A * alpha / r)."""
    lora_alpha: NonNegativeInt = 0
    """LoRA scaling alpha; 0 = 2 x lora_rank (the sft stage's ratio). Unused when lora_rank is 0."""
    max_failures: NonNegativeInt = 0
    """Ray Train FailureConfig.max_failures: worker-group restarts from the last checkpoint."""
    launcher: Literal["ray", "process"] = "ray"
    """ray = Ray Train TorchTrainer with num_workers workers (a local Ray, or $RAY_ADDRESS's cluster);
    process = this process alone (world size 1; debugging)."""
    experiment_id: str = ""
    """The experiment this run starts ('' = grpo-PROFILE-HASH of the config and inputs)."""
    resume_experiment: str = ""
    """Resume this experiment from its latest checkpoint in a new segment ('' = a fresh run)."""

    def __post_init__(self) -> None:
        check_ranges(self)
        get_profile(self.profile)  # an unknown profile fails here, naming the valid ones
        if self.prompts_per_step % self.num_workers:
            raise ValueError(
                f"grpo.prompts_per_step ({self.prompts_per_step}) must be a multiple of grpo.num_workers "
                f"({self.num_workers}): each worker rolls out an equal share"
            )
        if -1.0 < self.selector_coef < 0:
            raise ValueError(f"grpo.selector_coef must be >= 0 (or -1 for the profile's own), got {self.selector_coef}")
        if self.teacher_misleading_rate + self.teacher_no_read_rate > 1:
            raise ValueError("grpo.teacher_misleading_rate + teacher_no_read_rate must be <= 1")
        if self.rollout_source == "sglang":  # the servers are the worker's: refused here, when the run is planned
            try:
                worker_sglang_urls()
            except ValueError as exc:
                raise ValueError(f"grpo.rollout_source = 'sglang': {exc}") from None
        profile = get_profile(self.profile)
        for name in VARIANTS:
            if getattr(self, name) and profile.loss != "two_stream":
                raise ValueError(f"grpo.{name} is a variant of the two-stream profiles (selector credit); "
                                 f"profile {self.profile!r} has no selector stream")
        forcing_point = min(self.force_after_groups, -(-self.force_after_samples // self.group_size))
        if profile.forces_acceptance and self.max_rejected_groups <= forcing_point:
            raise ValueError(
                f"grpo.max_rejected_groups ({self.max_rejected_groups}) must exceed the forcing point of "
                f"{self.profile} (min(force_after_groups {self.force_after_groups}, force_after_samples "
                f"{self.force_after_samples} / group_size {self.group_size}) = {forcing_point} rejected groups): "
                "below it the step would give up where the method forces acceptance")
        if self.zero_stage != "auto" and (isinstance(self.zero_stage, bool) or not isinstance(self.zero_stage, int)):
            raise ValueError(f"grpo.zero_stage must be 0..3 or 'auto', got {self.zero_stage!r}")
        if self.lora_rank and self.zero_stage == 3:
            raise ValueError(LORA_STAGE3_REFUSED)
        if self.old_logprobs not in ("auto", "recompute"):
            raise ValueError(f"grpo.old_logprobs must be 'auto' or 'recompute', got {self.old_logprobs!r}")
        if self.launcher == "process" and self.num_workers != 1:
            raise ValueError(f"grpo.launcher = 'process' runs one worker; got num_workers = {self.num_workers}")

    @property
    def reusable(self) -> bool:
        """A resume is never answered from the stage cache (skillgate_core.pipeline.run): it always trains."""
        return not self.resume_experiment

    @property
    def variant(self) -> str:
        """The labelled variants this run uses, '+'-joined in VARIANTS order ('' = the method itself)."""
        return "+".join(name for name in VARIANTS if getattr(self, name))

    @property
    def lambda_(self) -> float:
        """The selector coefficient in force: the override, or the profile's own."""
        return get_profile(self.profile).selector_coef if self.selector_coef == -1.0 else self.selector_coef

"""Reinforcement learning: the GRPO trainer, its losses and profiles, and the stages around it.

Imported here: `profiles` only (pure Python); import every other module explicitly, most pull in torch.

The method (docs/method.md 6-7):
- `profiles`: the profile registry and `get_profile`; `loss_seeds`: the loss's seed hyperparameters.
- `loss`: `selector_grpo_loss` (the one the trainer calls, for every profile), `grpo_clipped_loss`
  (what it equals for the plain profiles), `low_variance_kl`, `global_token_normaliser`.
- `samples`: accepted groups -> `CreditedSample`s (advantages, token weights per conversion chunk).

The trainer (stage `grpo`):
- `grpo_config`: `GRPOConfig`; `grpo_stage`: the stage (experiment, segment, Ray launch, export).
- `grpo`: the per-worker loop, top to bottom (rollouts, credit, pack, log-probs, update, sync, record).
- `rl_tasks`, `prompt_stream`, `rollouts`: training prompts, their seeded order, one rollout step.
- `engine/`: the engine room the loop runs on (DeepSpeed ZeRO engine, frozen reference, colocated
  replica, ZeRO choice, safe checkpoint loading, flat gradient norm, packing, log-probs, varlen
  attention, collectives, the Ray Train launch); its face lists its public names.
- `sglang_sync`: server-mode rollouts and the weight push.
- `step_metrics`, `progress`, `training_curves`: one metrics row per step, rank 0's progress, the PNG.
- `heldin_probe`: the held-in probe's sample and scores (GRPOConfig.probe_every: a low-noise curve).

The data: `data_prep`, stage `rl-data-prep` (rl_train.parquet: frozen slates, prompt ids rendered once).
"""

from skillgate_core.rl.profiles import PROFILES, Profile, UnknownProfileError, get_profile, profile_names

__all__ = ["PROFILES", "Profile", "UnknownProfileError", "get_profile", "profile_names"]

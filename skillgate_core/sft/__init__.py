"""Supervised stages, all from collected trajectories.

- `trainer`: stage `sft` (TRL SFTTrainer + LoRA, merged into a plain HF model dir); `LoRATrainingConfig`.
- `baselines`: stages `bc` and `dpo`, the supervised selection baselines of docs/method.md 7.
- `realias`: more copies of one trajectory under fresh skill names, renamed in its token ids.
- `determinism`: deterministic training for sft, bc and dpo (the same rows, seed, device and software
  give the same weights).
"""

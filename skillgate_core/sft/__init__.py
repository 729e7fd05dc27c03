"""Supervised stages: SFT (TRL + LoRA + merge) on collected trajectories; BC and DPO baselines later."""

"""Reinforcement learning: the GRPO losses, the training profiles, and (elsewhere) the trainer.

- `profiles`: the seven METHOD.md 7 profiles and `get_profile` (pure Python, imported here).
- `loss`: `grpo_clipped_loss`, `selector_grpo_loss`, `low_variance_kl`, `global_token_normaliser`
  (torch; import `skillgate_core.rl.loss` explicitly so importing this package stays cheap).
- `data_prep`: the `rl-data-prep` stage (rl_train.parquet: frozen slates, prompt ids rendered once);
  import it explicitly (it pulls in polars and transformers).
"""

from skillgate_core.rl.profiles import PROFILES, Profile, UnknownProfileError, get_profile, profile_names

__all__ = ["PROFILES", "Profile", "UnknownProfileError", "get_profile", "profile_names"]

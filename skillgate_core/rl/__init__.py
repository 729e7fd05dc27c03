"""Reinforcement learning: the GRPO losses, the training profiles, and (elsewhere) the trainer.

- `profiles`: the seven docs/method.md 7 profiles and `get_profile` (pure Python, imported here).
- `loss`: `grpo_clipped_loss`, `selector_grpo_loss`, `low_variance_kl`, `global_token_normaliser`
  (torch; import `skillgate_core.rl.loss` explicitly so importing this package stays cheap).
- `data_prep`: the `rl-data-prep` stage (rl_train.parquet: frozen slates, prompt ids rendered once);
  import it explicitly (it pulls in pyarrow and transformers).

The distributed training layer the GRPO loop stands on (import each module explicitly):
- `packing`: samples -> one-row micro-batches under a token budget (no padding), packed layout.
- `logprobs`: `token_logprobs(model, micro_batch, temperature)`: float32 per-response-token log-probs.
- `engine`: DeepSpeed ZeRO-3 policy (`build_engine`), frozen reference (`build_reference`),
  `backward` / `optimizer_step`, the ZeRO-3 weight gather and the colocated replica refresh.
- `collectives`: global sums / maxima across ranks (the global normaliser N, micro-batch counts).
- `launch`: run one per-worker function on Ray Train workers (`launch_ray`) or in this process
  (`run_in_process`); each module's docstring shows its use.
"""

from skillgate_core.rl.profiles import PROFILES, Profile, UnknownProfileError, get_profile, profile_names

__all__ = ["PROFILES", "Profile", "UnknownProfileError", "get_profile", "profile_names"]

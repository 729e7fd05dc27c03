"""The GRPO loss's seed hyperparameters, apart from the loss itself (rl/loss.py imports torch; a
config that only needs these defaults, GRPOConfig, must not pay for that at import)."""

from __future__ import annotations

__all__ = ["SEED_BETA", "SEED_CLIP_HIGH", "SEED_CLIP_LOW"]

SEED_CLIP_LOW = 0.2
"""Lower clip range (seed): rho is clipped at 1 - 0.2."""
SEED_CLIP_HIGH = 0.28
"""Upper clip range (seed, asymmetric 'clip-higher'): rho is clipped at 1 + 0.28."""
SEED_BETA = 3e-5
"""KL coefficient (seed)."""

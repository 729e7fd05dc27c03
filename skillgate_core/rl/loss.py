"""GRPO losses: the plain clipped loss and SkillGate's two-stream selector loss (docs/method.md 6).

Every input is a per-token tensor of one shape (a packed 1-D sequence or a [batch, seq] block):
log-probs under the current, rollout (old) and reference policies, advantages broadcast to
tokens, weights and the loss mask. The normaliser N is passed in, not computed here, because it
is global: the number of loss tokens of the whole optimizer step (each episode counted as at least
1) summed across micro-batches and ranks. Compute it with `global_token_normaliser` and all-reduce
it before the first micro-batch.

  rho = exp(logp - logp_old)
  l(rho, A) = max(-rho A, -clip(rho, 1 - clip_low, 1 + clip_high) A)     (asymmetric, no dual clip)
  L = (1/N) [sum w_task l(rho, A_task) + lambda sum w_sel l(rho, A_sel)] + beta (1/N) sum m KL
  KL = clamp(exp(-d) - 1 + d, -10, 10),  d = logp - logp_ref            (low-variance "k3" form)

The KL VALUE is clamped (not d), so a token whose KL exceeds 10 gets no KL gradient. All of this is
float32 arithmetic whatever dtype the model's logits are in: every input is cast to float32 first
(bf16 ratios are off by up to 3%, enough to clip tokens that did not move). The two-stream loss
re-checks that no token carries both weights; the token-weight builder guarantees it, the loss
refuses to train on a batch where that guarantee was lost.

Sign convention: L is minimised. At rho = 1 (and logp = logp_ref), dL/dlogp_t = -w_t A_t / N for
the task stream and -lambda w_t A_t / N for the selector stream, so a gradient-descent step raises
the log-prob of tokens with positive advantage and lowers it for negative advantage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from numpy.typing import ArrayLike

from skillgate_core.rl.loss_seeds import SEED_BETA, SEED_CLIP_HIGH, SEED_CLIP_LOW

__all__ = [
    "KL_CLAMP",
    "SEED_BETA",
    "SEED_CLIP_HIGH",
    "SEED_CLIP_LOW",
    "LossOutput",
    "clipped_policy_term",
    "global_token_normaliser",
    "grpo_clipped_loss",
    "low_variance_kl",
    "selector_grpo_loss",
]

KL_CLAMP = 10.0
"""The per-token KL value is clamped to [-KL_CLAMP, KL_CLAMP] so one wild token cannot dominate."""
_D_SAFE = 30.0
"""d is bounded to +-this before exp() only so exp(-d) cannot overflow to inf (whose zero gradient
times inf would be NaN). It changes neither value nor gradient: the KL reaches KL_CLAMP at d ~ -2.6
and d ~ 11, well inside, and beyond that both are clamped anyway."""
LOSS_DTYPE = torch.float32
"""Every loss computation runs in this dtype."""


@dataclass(frozen=True)
class LossOutput:
    """The loss to backpropagate and its detached parts, for logging."""

    loss: torch.Tensor
    """Scalar total loss (with grad)."""
    policy_task: torch.Tensor
    """Detached (1/N) sum w_task l(rho, A_task)."""
    policy_selector: torch.Tensor
    """Detached (1/N) sum w_sel l(rho, A_sel), before lambda (0 for the plain loss)."""
    kl: torch.Tensor
    """Detached (1/N) sum m KL, before beta."""
    clip_fraction: torch.Tensor
    """Detached share of loss-masked tokens whose rho lies outside [1 - clip_low, 1 + clip_high]."""


def global_token_normaliser(masks: Iterable[ArrayLike | torch.Tensor]) -> float:
    """N = sum over episodes of max(1, sum of the episode's loss mask).

    Pass every episode this rank trains on in the optimizer step, then sum the result across
    ranks. An episode with no loss token still counts 1, so N > 0 whenever there is an episode.
    """
    total = 0.0
    for mask in masks:
        value = float(mask.sum()) if isinstance(mask, torch.Tensor) else float(torch.as_tensor(mask).sum())
        total += max(1.0, value)
    return total


def _float32(logp: torch.Tensor) -> torch.Tensor:
    """The model's log-probs in the loss dtype; the cast is differentiable, so gradients still reach
    a bf16 model. float64 inputs are kept (tests use them for exact vectors)."""
    return logp if logp.dtype == torch.float64 else logp.to(LOSS_DTYPE)


def _like(value: ArrayLike | torch.Tensor, reference: torch.Tensor, name: str) -> torch.Tensor:
    tensor = torch.as_tensor(value, device=reference.device)
    tensor = tensor.to(reference.dtype)
    if tensor.shape != reference.shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}, logp has {tuple(reference.shape)}")
    return tensor.detach()


def _check_normaliser(normaliser: float | torch.Tensor) -> None:
    if float(normaliser) <= 0:
        raise ValueError(f"normaliser N must be > 0, got {float(normaliser)}")


def clipped_policy_term(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float = SEED_CLIP_LOW,
    clip_high: float = SEED_CLIP_HIGH,
) -> torch.Tensor:
    """Per-token l(rho, A) = max(-rho A, -clip(rho, 1 - clip_low, 1 + clip_high) A).

    Where the clipped branch is the larger one the token gets no gradient: a positive-advantage
    token already pushed above 1 + clip_high, or a negative one pushed below 1 - clip_low, stops.
    """
    ratio = torch.exp(logp - logp_old.detach())
    unclipped = -ratio * advantages
    clipped = -torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    return torch.maximum(unclipped, clipped)


def low_variance_kl(logp: torch.Tensor, logp_ref: torch.Tensor, *, clamp: float = KL_CLAMP) -> torch.Tensor:
    """Per-token KL estimate clamp(exp(-d) - 1 + d, -clamp, clamp) with d = logp - logp_ref; >= 0."""
    d = torch.clamp(logp - logp_ref.detach(), -_D_SAFE, _D_SAFE)
    return torch.clamp(torch.exp(-d) - 1.0 + d, -clamp, clamp)


def _kl_sum(
    logp: torch.Tensor, logp_ref: ArrayLike | torch.Tensor | None, mask: torch.Tensor, beta: float
) -> torch.Tensor:
    if beta == 0.0 and logp_ref is None:
        return logp.new_zeros(())
    if logp_ref is None:
        raise ValueError("beta > 0 needs logp_ref")
    return (mask * low_variance_kl(logp, _like(torch.as_tensor(logp_ref), logp, "logp_ref"))).sum()


def _clip_fraction(
    logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor, clip_low: float, clip_high: float
) -> torch.Tensor:
    with torch.no_grad():
        ratio = torch.exp(logp - logp_old)
        outside = ((ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)).to(mask.dtype)
        return (outside * mask).sum() / mask.sum().clamp_min(1.0)


def selector_grpo_loss(
    logp: torch.Tensor,
    logp_old: ArrayLike | torch.Tensor,
    a_task: ArrayLike | torch.Tensor,
    a_sel: ArrayLike | torch.Tensor,
    w_task: ArrayLike | torch.Tensor,
    w_sel: ArrayLike | torch.Tensor,
    mask: ArrayLike | torch.Tensor,
    normaliser: float | torch.Tensor,
    *,
    selector_coef: float,
    logp_ref: ArrayLike | torch.Tensor | None = None,
    beta: float = SEED_BETA,
    clip_low: float = SEED_CLIP_LOW,
    clip_high: float = SEED_CLIP_HIGH,
) -> LossOutput:
    """SkillGate's two-stream loss over one micro-batch (see the module docstring for L).

    `w_task` / `w_sel` come from `skillgate_core.credit.token_weights`, `a_task` / `a_sel` from
    `per_token_advantages`; `selector_coef` is lambda (0 for the masked-task-only ablation, which
    still removes read calls from the task stream through w_task).
    """
    _check_normaliser(normaliser)
    logp = _float32(logp)
    old = _like(logp_old, logp, "logp_old")
    a_task_t, a_sel_t = _like(a_task, logp, "a_task"), _like(a_sel, logp, "a_sel")
    w_task_t, w_sel_t = _like(w_task, logp, "w_task"), _like(w_sel, logp, "w_sel")
    mask_t = _like(mask, logp, "mask")
    both = (w_task_t > 0) & (w_sel_t > 0)
    if bool(both.any()):
        raise ValueError(
            f"a token with both weights > 0 at {both.nonzero().flatten().tolist()[:10]}: the task and "
            "selector streams must be disjoint (docs/method.md 6); refusing to train on this batch"
        )
    task_sum = (
        w_task_t * clipped_policy_term(logp, old, a_task_t, clip_low=clip_low, clip_high=clip_high)
    ).sum()
    sel_sum = (
        w_sel_t * clipped_policy_term(logp, old, a_sel_t, clip_low=clip_low, clip_high=clip_high)
    ).sum()
    kl_sum = _kl_sum(logp, logp_ref, mask_t, beta)
    loss = (task_sum + selector_coef * sel_sum + beta * kl_sum) / normaliser
    return LossOutput(
        loss=loss,
        policy_task=(task_sum / normaliser).detach(),
        policy_selector=(sel_sum / normaliser).detach(),
        kl=(kl_sum / normaliser).detach(),
        clip_fraction=_clip_fraction(logp.detach(), old, mask_t, clip_low, clip_high),
    )


# Alike in signature to selector_grpo_loss (the same tensors): one advantage stream, not two.
def grpo_clipped_loss(
    logp: torch.Tensor,
    logp_old: ArrayLike | torch.Tensor,
    advantages: ArrayLike | torch.Tensor,
    mask: ArrayLike | torch.Tensor,
    normaliser: float | torch.Tensor,
    *,
    logp_ref: ArrayLike | torch.Tensor | None = None,
    beta: float = SEED_BETA,
    clip_low: float = SEED_CLIP_LOW,
    clip_high: float = SEED_CLIP_HIGH,
) -> LossOutput:
    """The plain clipped GRPO loss of the non-selector profiles: (1/N) sum m l(rho, A) + beta KL.

    Equal to `selector_grpo_loss` with w_task = m and no selector stream.
    """
    _check_normaliser(normaliser)
    logp = _float32(logp)
    old = _like(logp_old, logp, "logp_old")
    adv = _like(advantages, logp, "advantages")
    mask_t = _like(mask, logp, "mask")
    policy_sum = (mask_t * clipped_policy_term(logp, old, adv, clip_low=clip_low, clip_high=clip_high)).sum()
    kl_sum = _kl_sum(logp, logp_ref, mask_t, beta)
    loss = (policy_sum + beta * kl_sum) / normaliser
    return LossOutput(
        loss=loss,
        policy_task=(policy_sum / normaliser).detach(),
        policy_selector=logp.new_zeros(()),
        kl=(kl_sum / normaliser).detach(),
        clip_fraction=_clip_fraction(logp.detach(), old, mask_t, clip_low, clip_high),
    )

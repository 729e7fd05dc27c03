"""GRPO losses (METHOD.md 6): normaliser, plain vs two-stream, KL gradient, input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skillgate_core.rl.loss import (
    global_token_normaliser,
    grpo_clipped_loss,
    low_variance_kl,
    selector_grpo_loss,
)

D = torch.float64


def test_global_token_normaliser_counts_each_episode_at_least_once():
    assert global_token_normaliser([[1, 1, 0], [0, 0], np.ones(4), torch.tensor([1.0])]) == 2 + 1 + 4 + 1
    assert global_token_normaliser([]) == 0.0


def random_batch(seed: int = 0, n: int = 40):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(n, generator=g, dtype=D) * 4
    return {
        "logp": logp,
        "logp_old": logp + 0.4 * torch.randn(n, generator=g, dtype=D),
        "logp_ref": logp + 0.4 * torch.randn(n, generator=g, dtype=D),
        "adv": torch.randn(n, generator=g, dtype=D),
        "mask": (torch.rand(n, generator=g) > 0.3).to(D),
    }


def test_plain_loss_equals_two_stream_with_task_weights_equal_to_the_mask():
    b = random_batch()
    logp = b["logp"].clone().requires_grad_(True)
    plain = grpo_clipped_loss(
        logp, b["logp_old"], b["adv"], b["mask"], 17.0, logp_ref=b["logp_ref"], beta=0.1
    )
    two = selector_grpo_loss(
        logp,
        b["logp_old"],
        b["adv"],
        torch.randn(40, dtype=D),
        b["mask"],
        torch.zeros(40, dtype=D),
        b["mask"],
        17.0,
        selector_coef=0.2,
        logp_ref=b["logp_ref"],
        beta=0.1,
    )
    assert torch.allclose(plain.loss, two.loss)
    (g_plain,) = torch.autograd.grad(plain.loss, logp)
    (g_two,) = torch.autograd.grad(two.loss, logp)
    assert torch.allclose(g_plain, g_two)
    assert plain.policy_selector.item() == 0.0 and 0.0 <= plain.clip_fraction.item() <= 1.0


def test_loss_parts_add_up():
    b = random_batch(1)
    w_sel = torch.zeros(40, dtype=D)
    w_sel[3] = 5.0
    out = selector_grpo_loss(
        b["logp"],
        b["logp_old"],
        b["adv"],
        b["adv"] * 2,
        b["mask"] * 1.5,
        w_sel,
        b["mask"],
        9.0,
        selector_coef=0.2,
        logp_ref=b["logp_ref"],
        beta=0.3,
    )
    assert out.loss.item() == pytest.approx(out.policy_task + 0.2 * out.policy_selector + 0.3 * out.kl)
    kl = (b["mask"] * low_variance_kl(b["logp"], b["logp_ref"])).sum() / 9.0
    assert out.kl.item() == pytest.approx(kl.item())


def test_kl_gradient_is_beta_m_one_minus_exp_minus_d_over_n():
    b = random_batch(2)
    logp = b["logp"].clone().requires_grad_(True)
    beta, n = 0.5, 13.0
    # rho = 1 and A = 0: only the KL term has a gradient
    out = grpo_clipped_loss(
        logp, b["logp"], torch.zeros(40, dtype=D), b["mask"], n, logp_ref=b["logp_ref"], beta=beta
    )
    (g,) = torch.autograd.grad(out.loss, logp)
    d = b["logp"] - b["logp_ref"]
    assert torch.allclose(g, beta * b["mask"] * (1 - torch.exp(-d)) / n)


def test_kl_is_clamped_and_nonnegative():
    logp = torch.tensor([0.0, -30.0, -1.0, 2.0], dtype=D)
    ref = torch.tensor([-30.0, 0.0, -1.0, 1.0], dtype=D)
    kl = low_variance_kl(logp, ref)
    assert kl[0].item() == pytest.approx(np.exp(-10) - 1 + 10)
    assert kl[1].item() == pytest.approx(np.exp(10) - 1 - 10)
    assert kl[2].item() == 0.0 and torch.all(kl >= 0)


def test_input_checks():
    b = random_batch()
    with pytest.raises(ValueError, match="normaliser"):
        grpo_clipped_loss(b["logp"], b["logp_old"], b["adv"], b["mask"], 0.0, beta=0.0)
    with pytest.raises(ValueError, match="logp_ref"):
        grpo_clipped_loss(b["logp"], b["logp_old"], b["adv"], b["mask"], 1.0, beta=0.1)
    with pytest.raises(ValueError, match="shape"):
        grpo_clipped_loss(b["logp"], b["logp_old"], b["adv"][:5], b["mask"], 1.0, beta=0.0)

"""GRPO losses (docs/method.md 6): normaliser, plain vs two-stream, KL gradient, input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.loss import (
    global_token_normaliser,
    grpo_clipped_loss,
    low_variance_kl,
    selector_grpo_loss,
)
from skillgate_core.rl.profiles import get_profile, profile_names

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


def test_the_plain_profiles_one_loss_call_is_the_plain_loss_bit_for_bit():
    """The trainer makes one loss call for every profile (rl/grpo.py `_loss`): a plain profile's samples
    carry w_task = mask and w_sel = 0 (rl/samples.py; tests/rl/test_rollouts_and_samples.py) and its lambda
    is 0, and there the two-stream loss is the plain clipped loss: value, parts and gradient identical."""
    plain_profiles = [get_profile(n) for n in profile_names() if get_profile(n).loss == "plain_clipped"]
    assert plain_profiles and all(p.selector_coef == 0.0 for p in plain_profiles)
    assert all(GRPOConfig(profile=p.name).lambda_ == 0.0 for p in plain_profiles)
    b = random_batch(seed=5)
    logp = b["logp"].to(torch.float32).requires_grad_(True)
    old, ref, adv, mask = (b[k].to(torch.float32) for k in ("logp_old", "logp_ref", "adv", "mask"))
    plain = grpo_clipped_loss(logp, old, adv, mask, 23.0, logp_ref=ref, beta=0.04, clip_low=0.2, clip_high=0.28)
    one_call = selector_grpo_loss(logp, old, adv, torch.randn(40), mask, torch.zeros(40), mask, 23.0,
                                  selector_coef=0.0, logp_ref=ref, beta=0.04, clip_low=0.2, clip_high=0.28)
    assert torch.equal(plain.loss, one_call.loss)
    for part in ("policy_task", "policy_selector", "kl", "clip_fraction"):
        assert torch.equal(getattr(plain, part), getattr(one_call, part)), part
    (g_plain,) = torch.autograd.grad(plain.loss, logp)
    (g_one,) = torch.autograd.grad(one_call.loss, logp)
    assert torch.equal(g_plain, g_one)


def test_loss_parts_add_up():
    b = random_batch(1)
    w_sel = torch.zeros(40, dtype=D)
    w_sel[3] = 5.0
    w_task = b["mask"] * 1.5
    w_task[3] = 0.0  # the streams are disjoint
    out = selector_grpo_loss(
        b["logp"],
        b["logp_old"],
        b["adv"],
        b["adv"] * 2,
        w_task,
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


def test_kl_value_is_clamped_not_d():
    logp = torch.tensor([0.0, -30.0, -1.0, 2.0, -5.0, -400.0], dtype=D)
    ref = torch.tensor([-30.0, 0.0, -1.0, 1.0, 0.0, 0.0], dtype=D)
    kl = low_variance_kl(logp, ref)
    assert kl[0].item() == 10.0 and kl[1].item() == 10.0  # 29 and e^30 - 31, clamped as values
    assert kl[2].item() == 0.0 and torch.all(kl >= 0)
    assert kl[3].item() == pytest.approx(np.exp(-1) - 1 + 1)
    # d = -5: KL = e^5 - 6 = 142.4 > 10. Clamping d at +-10 (the old reading) would have kept 142.4
    # and its gradient; clamping the value gives 10 and no gradient.
    assert kl[4].item() == 10.0
    x = logp.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(low_variance_kl(x, ref).sum(), x)
    assert g[4].item() == 0.0 and g[0].item() == 0.0
    assert g[5].item() == 0.0 and torch.isfinite(g).all()  # d = -400 overflows nothing
    assert g[3].item() == pytest.approx(1 - np.exp(-1))


def test_loss_arithmetic_is_float32_for_a_bf16_model():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(24, 50, generator=g).to(torch.bfloat16)
    ids = torch.randint(0, 50, (24,), generator=g)
    # What the sampler recorded (old) and what the trainer recomputes at the first step: the same
    # bf16 logits, made float32 before log_softmax. The ratio must be exactly 1.
    old = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, None]).squeeze(-1)
    new = torch.log_softmax(logits.float().requires_grad_(True), -1).gather(-1, ids[:, None]).squeeze(-1)
    adv = torch.randn(24, generator=g)
    mask = torch.ones(24)
    out = grpo_clipped_loss(new.to(torch.bfloat16), old.to(torch.bfloat16), adv, mask, 24.0, beta=0.0)
    assert out.loss.dtype == torch.float32 and out.clip_fraction.item() == 0.0
    assert out.policy_task.item() == pytest.approx(-(adv.sum() / 24).item(), abs=1e-6)
    exact = grpo_clipped_loss(new, old, adv, mask, 24.0, beta=0.0)
    assert torch.exp(new - old).eq(1.0).all() and exact.clip_fraction.item() == 0.0


def test_two_stream_loss_refuses_a_token_with_both_weights():
    b = random_batch(4)
    w_task = b["mask"].clone()
    w_sel = torch.zeros(40, dtype=D)
    hit = int(torch.nonzero(b["mask"])[0])
    w_sel[hit] = 2.0
    with pytest.raises(ValueError, match="both weights"):
        selector_grpo_loss(b["logp"], b["logp_old"], b["adv"], b["adv"], w_task, w_sel, b["mask"], 5.0,
                           selector_coef=0.2, beta=0.0)


def test_input_checks():
    b = random_batch()
    with pytest.raises(ValueError, match="normaliser"):
        grpo_clipped_loss(b["logp"], b["logp_old"], b["adv"], b["mask"], 0.0, beta=0.0)
    with pytest.raises(ValueError, match="logp_ref"):
        grpo_clipped_loss(b["logp"], b["logp_old"], b["adv"], b["mask"], 1.0, beta=0.1)
    with pytest.raises(ValueError, match="shape"):
        grpo_clipped_loss(b["logp"], b["logp_old"], b["adv"][:5], b["mask"], 1.0, beta=0.0)

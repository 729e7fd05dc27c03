"""Trainer log-probs: float32 whatever the model dtype, and rho exactly 1 between two identical forwards."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from skillgate_core.rl.engine.logprobs import attention_inputs, token_logprobs
from skillgate_core.rl.engine.packing import PackingConfig, TrainSample, pack_samples, pad_micro_batches
from skillgate_core.rl.loss import global_token_normaliser, grpo_clipped_loss


def samples(vocab: int, n: int = 8, seed: int = 0) -> list[TrainSample]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = rng.randint(3, 30)
        out.append(
            TrainSample(
                prompt_ids=[rng.randrange(vocab) for _ in range(rng.randint(2, 30))],
                response_ids=[rng.randrange(vocab) for _ in range(r)],
                fields={"mask": [1.0] * r, "adv": [rng.choice([-1.0, 1.0])] * r},
            )
        )
    return out


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_bf16_ratio_is_exactly_one(tiny_model_dir, attn):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16, attn_implementation=attn)
    model.train()  # no dropout in Qwen2, but train mode is how the trainer runs it
    data = samples(model.config.vocab_size)
    mbs = pack_samples(data, PackingConfig(max_tokens=96))
    with torch.no_grad():
        old = [token_logprobs(model, mb, temperature=0.9) for mb in mbs]
    n = global_token_normaliser(s.fields["mask"] for s in data)
    for mb, logp_old in zip(mbs, old, strict=True):
        logp = token_logprobs(model, mb, temperature=0.9)
        assert logp.dtype == torch.float32 and logp.requires_grad
        ratio = torch.exp(logp - logp_old)
        assert torch.equal(ratio, torch.ones_like(ratio)), (ratio - 1).abs().max()
        out = grpo_clipped_loss(logp, logp_old, mb.fields["adv"], mb.fields["mask"], n, beta=0.0)
        out.loss.backward()
        assert out.clip_fraction.item() == 0.0
    assert model.model.embed_tokens.weight.grad is not None


def test_empty_micro_batch_gives_empty_logprobs_and_zero_gradient(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    [empty] = pad_micro_batches([], 1, field_names=["mask"])
    logp = token_logprobs(model, empty)
    assert logp.shape == (0,)
    logp.sum().backward()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_unsupported_attention_is_refused(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.config._attn_implementation = "flex_attention"
    [mb] = pack_samples(samples(500, n=2), PackingConfig(max_tokens=200))
    with pytest.raises(ValueError, match="not supported"):
        attention_inputs(model, mb)

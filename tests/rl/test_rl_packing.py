"""Packing: budgets, determinism, layout bookkeeping, and packed log-probs == per-sequence log-probs."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from skillgate_core.policy.local_sampler import sequence_logprobs
from skillgate_core.rl.engine.logprobs import token_logprobs
from skillgate_core.rl.engine.packing import (
    PackingConfig,
    TrainSample,
    block_causal_mask,
    pack_samples,
    pad_micro_batches,
    unpack,
)


def make_samples(n: int, seed: int = 0, vocab: int = 500, max_len: int = 40) -> list[TrainSample]:
    rng = random.Random(seed)
    samples = []
    for _ in range(n):
        p, r = rng.randint(1, max_len // 2), rng.randint(1, max_len // 2)
        samples.append(
            TrainSample(
                prompt_ids=[rng.randrange(vocab) for _ in range(p)],
                response_ids=[rng.randrange(vocab) for _ in range(r)],
                fields={"mask": [float(rng.random() < 0.8) for _ in range(r)], "adv": [rng.gauss(0, 1) for _ in range(r)]},
            )
        )
    return samples


def test_ffd_respects_budget_keeps_every_sample_and_is_deterministic():
    samples = make_samples(50)
    cfg = PackingConfig(max_tokens=64)
    mbs = pack_samples(samples, cfg)
    assert all(mb.num_tokens <= 64 for mb in mbs)
    assert sorted(i for mb in mbs for i in mb.sample_indices) == list(range(50))
    # no padding: the rows hold exactly the samples' tokens
    assert sum(mb.num_tokens for mb in mbs) == sum(s.num_tokens for s in samples)
    # first-fit-decreasing needs few bins: within 25% + 1 of the volume bound
    assert len(mbs) <= 1.25 * sum(s.num_tokens for s in samples) / 64 + 1
    again = pack_samples(samples, cfg)
    assert [mb.sample_indices for mb in mbs] == [mb.sample_indices for mb in again]


def test_layout_positions_targets_and_fields():
    samples = [
        TrainSample([5, 6, 7], [8, 9], {"m": [1, 0]}),
        TrainSample([1], [2, 3, 4], {"m": [1, 1, 0]}),
    ]
    [mb] = pack_samples(samples, PackingConfig(max_tokens=16))
    assert mb.sample_indices == (0, 1)
    assert mb.input_ids.tolist() == [[5, 6, 7, 8, 9, 1, 2, 3, 4]]
    assert mb.position_ids.tolist() == [[0, 1, 2, 3, 4, 0, 1, 2, 3]]
    assert mb.cu_seqlens.tolist() == [0, 5, 9]
    assert mb.target_ids.tolist() == [8, 9, 2, 3, 4]
    assert mb.target_positions.tolist() == [2, 3, 5, 6, 7]  # the token before each target
    assert mb.fields["m"].dtype == torch.float32
    assert mb.fields["m"].tolist() == [1, 0, 1, 1, 0]
    assert [t.tolist() for t in mb.split(mb.target_ids)] == [[8, 9], [2, 3, 4]]
    mask = block_causal_mask(mb)[0, 0]
    assert mask[6, 5] and not mask[5, 4] and not mask[3, 4] and mask[4, 0]


def test_unpack_restores_input_order_and_padding_is_empty():
    samples = make_samples(9, seed=3)
    mbs = pack_samples(samples, PackingConfig(max_tokens=48))
    per_sample = unpack(mbs, [mb.fields["adv"] for mb in mbs], len(samples))
    for s, values in zip(samples, per_sample, strict=True):
        torch.testing.assert_close(values, torch.tensor(s.fields["adv"], dtype=torch.float32))
    padded = pad_micro_batches(mbs, len(mbs) + 2, field_names=["adv", "mask"])
    assert len(padded) == len(mbs) + 2
    assert padded[-1].num_response_tokens == 0 and set(padded[-1].fields) == {"adv", "mask"}
    with pytest.raises(ValueError, match="below"):
        pad_micro_batches(mbs, len(mbs) - 1, field_names=["adv"])


def test_refusals():
    with pytest.raises(ValueError, match="prompt token"):
        TrainSample([], [1])
    with pytest.raises(ValueError, match="response tokens"):
        TrainSample([1], [2, 3], {"m": [1]})
    with pytest.raises(ValueError, match="budget"):
        pack_samples([TrainSample([1] * 10, [2] * 10)], PackingConfig(max_tokens=16))
    with pytest.raises(ValueError, match="fields"):
        pack_samples([TrainSample([1], [2], {"a": [1]}), TrainSample([1], [2], {"b": [1]})], PackingConfig())


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_logprobs_equal_per_sequence_logprobs(tiny_model_dir, attn):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation=attn)
    model.eval()
    samples = make_samples(12, seed=1, vocab=model.config.vocab_size, max_len=60)
    mbs = pack_samples(samples, PackingConfig(max_tokens=128))
    assert any(len(mb.sample_indices) > 2 for mb in mbs)  # real packing happened
    for temperature in (1.0, 0.7):
        with torch.no_grad():
            packed = unpack(mbs, [token_logprobs(model, mb, temperature) for mb in mbs], len(samples))
            for s, got in zip(samples, packed, strict=True):
                alone = sequence_logprobs(model, s.prompt_ids, s.response_ids, temperature)
                assert got.dtype == torch.float32
                torch.testing.assert_close(got, alone, atol=1e-5, rtol=0)

"""Evaluation's sampler: a row's tokens depend on its own prompt, seed and limit only (not on its batch)."""

from __future__ import annotations

import pytest
import torch

from skillgate_core.policy.local_sampler import SamplingConfig, load_policy, sequence_logprobs
from skillgate_core.policy.seeded_sampler import sample_seeded


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    torch.set_num_threads(1)
    return load_policy(tiny_model_dir)


def test_a_row_does_not_depend_on_its_batch(policy):
    model, tok = policy
    ids = [tok(text, add_special_tokens=False)["input_ids"] for text in ("list the skills", "x" * 40, "read /skills")]
    cfg = SamplingConfig(max_new_tokens=40)
    [alone] = sample_seeded(model, tok, [ids[0]], [11], cfg)
    batched = sample_seeded(model, tok, [ids[1], ids[0], ids[2]], [5, 11, 7], cfg)
    assert batched[1].token_ids == alone.token_ids and batched[1].finish == alone.finish
    assert max(abs(a - b) for a, b in zip(batched[1].logprobs, alone.logprobs, strict=True)) < 1e-4
    assert sample_seeded(model, tok, [ids[0]], [12], cfg)[0].token_ids != alone.token_ids
    # per-row limits: a cut row ends with finish "length"
    short, full = sample_seeded(model, tok, [ids[0], ids[0]], [11, 11], cfg, max_new_tokens=[3, 40])
    assert short.token_ids == alone.token_ids[:3] and short.finish == "length" and full.token_ids == alone.token_ids
    # the recorded log-probs are the tempered teacher-forced ones (what the trainer computes)
    forced = sequence_logprobs(model, ids[0], alone.token_ids)
    assert torch.allclose(forced, torch.tensor(alone.logprobs), atol=1e-4)
    assert alone.text == tok.decode(list(alone.token_ids), skip_special_tokens=True)

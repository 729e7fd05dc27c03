"""Local sampling keeps ids + log-probs that match what the trainer recomputes."""

from __future__ import annotations

import pytest
import torch

from skillgate_core.policy.local_sampler import (
    SamplingConfig,
    sample_completions,
    sequence_logprobs,
)


def prompts(tok):
    msgs = [[{"role": "user", "content": "list the files"}], [{"role": "system", "content": "You are an agent."},
                                                            {"role": "user", "content": "read /skills/a/SKILL.md please"}]]
    return [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False) for m in msgs]


@pytest.mark.parametrize("shape", ["policy", "llama_policy"])
def test_logprobs_match_teacher_forced_recompute(shape, request):
    model, tok = request.getfixturevalue(shape)
    ps = prompts(tok)
    assert len(ps[0]) != len(ps[1])  # exercises left padding
    for temperature in (1.0, 0.7):
        comps = sample_completions(model, tok, ps, SamplingConfig(max_new_tokens=24, temperature=temperature, seed=3))
        for prompt, c in zip(ps, comps, strict=True):
            assert len(c.token_ids) == len(c.logprobs) > 0
            recomputed = sequence_logprobs(model, prompt, c.token_ids, temperature)
            torch.testing.assert_close(recomputed, torch.tensor(c.logprobs), atol=2e-4, rtol=0)


def test_finish_reason_and_determinism(policy):
    model, tok = policy
    ps = prompts(tok)
    a = sample_completions(model, tok, ps, SamplingConfig(max_new_tokens=8, seed=1))
    b = sample_completions(model, tok, ps, SamplingConfig(max_new_tokens=8, seed=1))
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    for c in a:
        if c.finish == "length":
            assert len(c.token_ids) == 8
        else:
            assert c.token_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")


def test_bad_sampling_config_is_refused():
    with pytest.raises(ValueError, match="temperature"):
        SamplingConfig(temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0)

"""torch_varlen attention: a packed row scores each sample as if alone, with gradients, and the engine
keeps it out of the sampling replica (CPU: the per-sample sdpa reference path of the same function)."""

from __future__ import annotations

import pytest
import torch
from test_rl_logprobs import samples
from transformers import AutoModelForCausalLM

from skillgate_core.policy.local_sampler import sequence_logprobs
from skillgate_core.rl.engine.logprobs import attention_inputs, packs_varlen, token_logprobs
from skillgate_core.rl.engine.packing import PackingConfig, pack_samples, unpack
from skillgate_core.rl.engine.varlen_attention import TORCH_VARLEN, register, varlen_attention_forward


def test_packed_rows_match_each_sample_alone_with_gradients(tiny_policy_dir):
    register()
    model = AutoModelForCausalLM.from_pretrained(tiny_policy_dir, dtype=torch.float32, attn_implementation=TORCH_VARLEN)
    alone = AutoModelForCausalLM.from_pretrained(tiny_policy_dir, dtype=torch.float32, attn_implementation="sdpa")
    assert model.config._attn_implementation == TORCH_VARLEN and packs_varlen(model)
    data = samples(model.config.vocab_size, n=10)
    mbs = pack_samples(data, PackingConfig(max_tokens=160))
    assert any(len(mb.sample_indices) > 2 for mb in mbs)
    assert "cu_seq_lens_q" in attention_inputs(model, mbs[0])
    logps = [token_logprobs(model, mb, temperature=0.8) for mb in mbs]
    with torch.no_grad():
        for packed, s in zip(unpack(mbs, logps, len(data)), data, strict=True):
            ref = sequence_logprobs(alone, s.prompt_ids, s.response_ids, 0.8)
            torch.testing.assert_close(packed.detach(), ref, atol=2e-5, rtol=0)
    sum(lp.sum() for lp in logps).backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_unpacked_batches_and_refusals():
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8)
    out, _ = varlen_attention_forward(torch.nn.Module(), q, k, k.clone(), None, scaling=0.3)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), k.repeat_interleave(2, 1),
                                                           is_causal=True, scale=0.3).transpose(1, 2)
    torch.testing.assert_close(out, ref)
    with pytest.raises(ValueError, match="attention mask"):
        varlen_attention_forward(torch.nn.Module(), q, k, k, torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="KV cache"):
        varlen_attention_forward(torch.nn.Module(), q, torch.randn(2, 2, 9, 8), torch.randn(2, 2, 9, 8), None)


def test_self_check_passes_on_the_reference_path():
    from skillgate_core.rl.engine.varlen_attention import self_check

    assert self_check("cpu", torch.float32) is None

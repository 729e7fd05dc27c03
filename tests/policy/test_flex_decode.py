"""The decode step's attention as one flex-attention kernel (`decode_attention="flex"`) draws what the
batched-matmul attention draws, fused or not, step by step or in blocks, compiled whole, and through
the turn cache."""

from __future__ import annotations

import warnings

import pytest
import torch

from skillgate_core.policy import fast_sampler
from skillgate_core.policy.fast_sampler import StaticSampler
from skillgate_core.policy.local_sampler import SamplingConfig, load_policy, sequence_logprobs
from tests.policy.test_fast_sampler import decode_attention_inputs
from tests.policy.test_fused_decode import prompts, same_draws

# eager flex attention (the CPU) is PyTorch's reference and says so once; that is what these tests want
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def test_flex_attention_matches_the_batched_matmuls_and_a_mask_goes_to_sdpa():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    module, q, k, v, allowed, bias = decode_attention_inputs(seed=3, length=13, keep=0.5)
    got, _ = fast_sampler.flex_decode_attention(module, q, k, v, bias, scaling=0.3)
    want, _ = fast_sampler.static_decode_attention(module, q, k, v, bias, scaling=0.3)
    assert got.shape == want.shape == (3, 1, 6, 8)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    masked_out = v.clone()
    masked_out[:, :, ~allowed[0, 0, 0]] = 1e4  # values behind the bias of row 0 do not reach row 0
    row0, _ = fast_sampler.flex_decode_attention(module, q[:1], k[:1], masked_out[:1], bias[:1], scaling=0.3)
    torch.testing.assert_close(row0, want[:1], atol=1e-5, rtol=1e-5)
    boolean, _ = fast_sampler.flex_decode_attention(module, q, k, v, allowed, scaling=0.3)
    torch.testing.assert_close(boolean, sdpa_attention_forward(module, q, k, v, allowed, scaling=0.3)[0])


@pytest.mark.parametrize("shape", ["policy", "llama_policy"])
@pytest.mark.parametrize("fuse,block_decode", [(False, False), (True, True)])
def test_flex_decode_draws_what_the_batched_matmuls_draw(shape, fuse, block_decode, request, monkeypatch):
    """policy: Qwen2-shaped (2 query heads per KV head); llama_policy: SmolLM2's shape (3 per KV head).
    Every decode step of every layer attends through flex attention (counted), the prefill does not."""
    import torch.nn.attention.flex_attention as flex_module

    model, tok = request.getfixturevalue(shape)
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=16, seed=5)
    bmm = StaticSampler(model, tok, fuse_projections=fuse, block_decode=block_decode)
    flex = StaticSampler(model, tok, fuse_projections=fuse, block_decode=block_decode, decode_attention="flex")
    calls, real = [], flex_module.flex_attention
    monkeypatch.setattr(flex_module, "flex_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    a = bmm.sample(ps, cfg)
    assert not calls  # the batched-matmul sampler never reaches flex attention
    b = flex.sample(ps, cfg)
    assert flex.stats["fused_decode"] == fuse and flex.stats["decode_attention"] == "flex"
    assert len(calls) == flex.stats["decode_steps"] * model.config.num_hidden_layers > 0
    same_draws(a, b)
    for prompt, c in zip(ps, b, strict=True):  # the recorded log-probs are the model's own
        torch.testing.assert_close(sequence_logprobs(model, prompt, c.token_ids, 1.0), torch.tensor(c.logprobs),
                                   atol=1e-5, rtol=0)


def test_flex_decode_traces_whole_and_serves_the_turn_cache(policy):
    """Compiled (eager backend, fullgraph: no graph break around flex attention), with dummy rows, and
    through sample_turns: the same tokens as the batched-matmul sampler compiled alike (the same padded
    batch, so the same random numbers)."""
    model, tok = policy
    ps = prompts(tok)
    torch._dynamo.reset()
    compiled = {"compile": True, "compile_options": {"backend": "eager", "fullgraph": True, "mode": None}}
    cfg = SamplingConfig(max_new_tokens=10, seed=8)
    alike = {"block_decode": True, "graph_steps": 4, "fuse_projections": True, **compiled}
    bmm = StaticSampler(model, tok, **alike)
    flex = StaticSampler(model, tok, decode_attention="flex", **alike)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_draws(bmm.sample(ps, cfg), flex.sample(ps, cfg))
        assert flex.stats["batch_bucket"] == 4  # 3 rows and a dummy one
        keys = ["x", "y", "z"]
        first = [bmm.sample_turns(keys, ps, cfg), flex.sample_turns(keys, ps, cfg)]
        same_draws(*first)
        longer = [list(p) + list(c.token_ids) for p, c in zip(ps, first[0], strict=True)]
        second = [s.sample_turns(["z", "x"], [longer[2], longer[0]], cfg) for s in (bmm, flex)]
    same_draws(*second)
    assert flex.turns.counters["reused_tokens"] > 0


def test_an_unknown_decode_attention_is_refused(policy):
    model, tok = policy
    with pytest.raises(ValueError, match="decode_attention must be 'bmm' or 'flex', got 'sdpa'"):
        StaticSampler(model, tok, decode_attention="sdpa")  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run on the GPU machine)")
def test_flex_on_a_gpu_draws_what_the_batched_matmuls_draw(tiny_model_dir):
    """On a GPU, compiled with captured blocks and fused projections (the defaults there): in float32 the
    same tokens as the batched-matmul attention, log-probs within float noise, twice (capture, replay)."""
    model, tok = load_policy(tiny_model_dir, dtype=torch.float32, device="cuda")
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=40, seed=7)
    bmm = StaticSampler(model, tok)
    flex = StaticSampler(model, tok, decode_attention="flex")
    a = bmm.sample(ps, cfg)
    for _ in range(2):
        same_draws(a, flex.sample(ps, cfg), atol=1e-3)
        assert flex.stats["fused_decode"] and flex.stats["block_decode"] == "graphs"

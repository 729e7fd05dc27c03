"""Shared prefix (StaticSamplerConfig.shared_prefix): the rows that share a prompt keep its K/V once and a
decode step reads it once per group, merged exactly with each row's own tokens: the same ids and
log-probs as every row holding its own copy."""

from __future__ import annotations

import pytest
import torch

from skillgate_core.policy.local_sampler import SamplingConfig, load_policy
from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig, decode_attention
from skillgate_core.policy.static.shared_prefix import group_rows


def grouped_prompts(tok):
    """Three prompts of three lengths in groups of 3, 1 and 2, interleaved (the caller's order is not the
    groups')."""
    msgs = [[{"role": "user", "content": "list the files"}],
            [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "read /skills/a/SKILL.md"}],
            [{"role": "user", "content": "x"}]]
    a, b, c = (tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False) for m in msgs)
    return [a, c, a, b, c, a]


def test_rows_are_laid_out_group_by_group():
    distinct, rows, per_group, groups = group_rows([[1], [2], [1], [3], [2], [1]], compiled=False)
    assert distinct == [[1], [2], [3]] and per_group == 3 and groups == 3
    assert rows == [0, 3, 1, 6, 4, 2]
    _, rows, per_group, groups = group_rows([[1], [2], [1], [3], [2], [1]], compiled=True)
    assert (per_group, groups) == (4, 4) and rows == [0, 4, 1, 8, 5, 2]


def test_merged_partial_softmaxes_are_the_softmax_over_all_keys():
    """A group's prompt attended once for its rows, merged with each row's own keys: what one softmax over
    the row's prompt copy and its own keys gives (a dummy group's all-masked prompt adds nothing)."""
    decode_attention.register_static_attention()
    g = torch.Generator().manual_seed(1)
    groups, rows, kv_heads, per_head, dim, prompt, own = 3, 2, 2, 3, 8, 9, 5
    batch = groups * rows
    module = type("M", (torch.nn.Module,), {"layer_idx": 0})()
    q = torch.randn(batch, kv_heads * per_head, 1, dim, generator=g)
    pk, pv = torch.randn(groups, kv_heads, prompt, dim, generator=g), torch.randn(groups, kv_heads, prompt, dim, generator=g)
    ok, ov = torch.randn(batch, kv_heads, own, dim, generator=g), torch.randn(batch, kv_heads, own, dim, generator=g)
    pbias = torch.zeros(groups, 1, 1, prompt)
    pbias[0, ..., :3] = decode_attention.MASKED  # group 0: a shorter prompt, left padded
    pbias[2] = decode_attention.MASKED  # group 2: a dummy group, no prompt at all
    obias = torch.zeros(batch, 1, 1, own)
    obias[..., 3:] = decode_attention.MASKED  # three own tokens so far
    cache = type("C", (), {"layers": [type("L", (), {"keys": pk, "values": pv})()]})()
    with decode_attention.shared_prefix(decode_attention.SharedPrefix(cache, pbias, rows)):
        merged, _ = decode_attention.static_decode_attention(module, q, ok, ov, obias, scaling=0.4)
    group = torch.arange(batch) // rows
    whole_k, whole_v = torch.cat([pk[group], ok], dim=2), torch.cat([pv[group], ov], dim=2)
    whole, _ = decode_attention.static_decode_attention(module, q, whole_k, whole_v,
                                                        torch.cat([pbias[group], obias], dim=-1), scaling=0.4)
    torch.testing.assert_close(merged, whole, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shape,temperature,block", [("policy", 1.0, False), ("policy", 0.05, True),
                                                     ("llama_policy", 1.0, True), ("llama_policy", 0.05, False)])
def test_shared_prefix_draws_what_a_copy_per_row_draws(shape, temperature, block, request):
    """Sampled and near-greedy, per-step loop and block decoding, Qwen2 and Llama: the same ids, finishes
    and log-probs as StaticSampler.sample with a prompt copy per row, and the K/V a step reads (from the
    shapes) below what the copies would read."""
    model, tok = request.getfixturevalue(shape)
    ps = grouped_prompts(tok)
    cfg = SamplingConfig(max_new_tokens=20, temperature=temperature, seed=11)
    copies = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], block_decode=block)).sample(ps, cfg)
    shared = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], block_decode=block, shared_prefix=True))
    got = shared.sample(ps, cfg)
    assert [c.token_ids for c in got] == [c.token_ids for c in copies]
    assert [c.finish for c in got] == [c.finish for c in copies]
    for x, y in zip(got, copies, strict=True):
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-5, rtol=0)
    stats = shared.stats
    assert stats["shared_prefix"] == {"groups": 3, "groups_bucket": 3, "rows_per_group": 3,
                                      "prefix_slots": max(len(p) for p in ps)}
    assert stats["kv_bytes_per_step"] < stats["kv_bytes_per_step_unshared"]


def test_shared_prefix_stops_rows_and_compiles(policy):
    """Stop tokens end rows as without sharing; compiled (fullgraph, dummy groups and rows, a bucketed
    prefix) it draws what the compiled sampler with a copy per row draws at the same batch."""
    model, tok = policy
    ps = grouped_prompts(tok)
    cfg = SamplingConfig(max_new_tokens=16, seed=3)
    free = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[])).sample(ps, cfg)
    stop_ids = sorted({c.token_ids[2] for c in free})
    a = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=stop_ids)).sample(ps, cfg)
    b = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=stop_ids, shared_prefix=True)).sample(ps, cfg)
    assert [c.token_ids for c in a] == [c.token_ids for c in b] and all(c.finish == "stop" for c in b)
    torch._dynamo.reset()
    compiled = {"stop_ids": [], "compile": True, "block_decode": True, "graph_steps": 4, "length_bucket": 32,
                "compile_options": {"backend": "eager", "fullgraph": True, "mode": None}}
    # compiled, every row of the batch draws (a static shape), so draws match where as many rows draw:
    # the copies' batch padded to the shared layout's 4 groups x 4 rows
    copies = StaticSampler(model, tok, StaticSamplerConfig(min_batch=16, **compiled)).sample(ps, cfg)
    shared = StaticSampler(model, tok, StaticSamplerConfig(shared_prefix=True, **compiled))
    got = shared.sample(ps, cfg)
    assert [c.token_ids for c in got] == [c.token_ids for c in copies]
    assert shared.stats["shared_prefix"]["groups_bucket"] == 4 and shared.stats["batch_bucket"] == 16
    torch._dynamo.reset()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the GPU machine)")
def test_captured_shared_prefix_draws_what_copies_draw(tiny_llama_dir):
    """On a GPU (compiled, captured blocks, fused projections: the defaults) with shared_prefix on: the same
    tokens as a copy per row at the same batch (16 rows draw), log-probs within bf16 noise (the merge rounds
    in another order), on a first (capturing) and a second call."""
    model, tok = load_policy(tiny_llama_dir, dtype=torch.bfloat16, device="cuda")
    ps = grouped_prompts(tok)
    cfg = SamplingConfig(max_new_tokens=40, seed=7)
    copies = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], min_batch=16)).sample(ps, cfg)  # 4 x 4 rows
    shared = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], shared_prefix=True))
    for _ in range(2):
        got = shared.sample(ps, cfg)
        assert shared.stats["block_decode"] == "graphs"
        assert [c.token_ids for c in got] == [c.token_ids for c in copies]
        for x, y in zip(got, copies, strict=True):
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=2e-2, rtol=0)

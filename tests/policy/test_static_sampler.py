"""The static-cache sampler keeps local_sampler's contract: same ids and log-probs for one seed on CPU,
log-probs that teacher forcing reproduces, stop tokens and finish reasons per row, any prompt lengths."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from skillgate_core.agent.policies import LocalPolicy
from skillgate_core.policy.local_sampler import (
    SamplingConfig,
    load_policy,
    sample_completions,
    sequence_logprobs,
)
from skillgate_core.policy.static import (
    StaticSampler,
    StaticSamplerConfig,
    decode_attention,
    resolve_sampler,
    sample_batch,
)
from skillgate_core.policy.static import decoder as decoder_module


def prompts(tok):
    msgs = [
        [{"role": "user", "content": "list the files"}],
        [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "read /skills/a/SKILL.md please"}],
        [{"role": "user", "content": "x"}],
    ]
    out = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False) for m in msgs]
    assert len({len(p) for p in out}) == 3  # three prompt lengths: left padding matters
    return out


def assert_teacher_forced(model, ps, comps, temperature):
    for prompt, c in zip(ps, comps, strict=True):
        assert len(c.token_ids) == len(c.logprobs) > 0
        recomputed = sequence_logprobs(model, prompt, c.token_ids, temperature)
        torch.testing.assert_close(recomputed, torch.tensor(c.logprobs), atol=1e-5, rtol=0)


@pytest.mark.parametrize("shape,temperature,top_p", [("policy", 1.0, 1.0), ("policy", 0.7, 1.0),
                                                     ("policy", 1.0, 0.9), ("llama_policy", 1.0, 1.0)])
def test_same_ids_and_logprobs_as_local_sampler_for_one_seed(shape, temperature, top_p, request):
    """llama_policy: SmolLM2's shape (no qkv bias, 9 query heads over 3 KV heads) through the same code."""
    model, tok = request.getfixturevalue(shape)
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=24, temperature=temperature, top_p=top_p, seed=3)
    fast = StaticSampler(model, tok).sample(ps, cfg)
    hf = sample_completions(model, tok, ps, cfg)
    assert [c.token_ids for c in fast] == [c.token_ids for c in hf]
    assert [c.finish for c in fast] == [c.finish for c in hf]
    assert [c.text for c in fast] == [c.text for c in hf]
    for a, b in zip(fast, hf, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=0)
    assert_teacher_forced(model, ps, fast, temperature)


def test_compiled_step_traces_whole_and_buckets_shapes(policy):
    """The decode step compiles with no graph break (fullgraph, eager backend: what CUDA would capture),
    with dummy batch rows and a rounded-up cache; log-probs still match teacher forcing."""
    model, tok = policy
    ps = prompts(tok)
    torch._dynamo.reset()
    sampler = StaticSampler(model, tok, StaticSamplerConfig(compile=True, compile_options={"backend": "eager", "fullgraph": True, "mode": None}))
    comps = sampler.sample(ps, SamplingConfig(max_new_tokens=20, seed=5))
    assert sampler.stats["batch_bucket"] == 4 and sampler.stats["cache_length"] == 256
    assert_teacher_forced(model, ps, comps, 1.0)
    again = sampler.sample(ps[:2], SamplingConfig(max_new_tokens=20, seed=5))  # cache reused, reset
    assert sampler.stats["batch_bucket"] == 2
    assert_teacher_forced(model, ps[:2], again, 1.0)


def test_shape_floors_give_every_call_one_compiled_shape(policy):
    """min_batch / min_cache_length: calls of 3 and 1 rows with different prompt and token budgets all run
    at (4, 512), the shape the floors set (one graph), and stay exact (teacher forcing); a call larger than
    the floors still gets its own bucket."""
    model, tok = policy
    ps = prompts(tok)
    torch._dynamo.reset()
    sampler = StaticSampler(model, tok, StaticSamplerConfig(compile=True, min_batch=3, min_cache_length=300,
                            compile_options={"backend": "eager", "fullgraph": True, "mode": None}))
    shapes = set()
    for batch, new in ((ps, 20), (ps[:1], 7), (ps[1:], 33)):
        comps = sampler.sample(batch, SamplingConfig(max_new_tokens=new, seed=2))
        shapes.add((sampler.stats["batch_bucket"], sampler.stats["cache_length"]))
        assert_teacher_forced(model, batch, comps, 1.0)
    assert shapes == {(4, 512)}
    sampler.sample(ps + ps[:2], SamplingConfig(max_new_tokens=4, seed=2))
    assert sampler.stats["batch_bucket"] == 8
    with pytest.raises(ValueError, match="min_batch"):
        StaticSampler(model, tok, StaticSamplerConfig(min_batch=0))


def test_stop_tokens_end_each_row_and_the_loop(policy):
    model, tok = policy
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=16, seed=11)
    free = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[])).sample(ps, cfg)
    assert all(c.finish == "length" and len(c.token_ids) == 16 for c in free)
    # stop on the 4th token row 0 drew: row 0 ends there; other rows end at their first such token
    stop = free[0].token_ids[3]
    sampler = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[stop]))
    stopped = sampler.sample(ps, cfg)
    for a, b in zip(free, stopped, strict=True):
        if stop in a.token_ids:
            end = a.token_ids.index(stop) + 1
            assert b.finish == "stop" and b.token_ids == a.token_ids[:end] and b.token_ids[-1] == stop
            assert b.logprobs == a.logprobs[:end]
        else:
            assert b.finish == "length" and b.token_ids == a.token_ids
    # every row stopping ends the loop early (checked every finish_check_every steps)
    firsts = {c.token_ids[0] for c in free}
    quick = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=sorted(firsts), finish_check_every=2))
    out = quick.sample(ps, cfg)
    assert all(c.finish == "stop" and len(c.token_ids) == 1 for c in out)
    assert quick.stats["decode_steps"] == 0


def test_chunked_prefill_and_eager_attention_give_the_same_sample(policy, tiny_model_dir, monkeypatch):
    model, tok = policy
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=12, seed=2)
    base = StaticSampler(model, tok).sample(ps, cfg)
    monkeypatch.setattr(decoder_module, "MASK_ELEMENTS", 3 * 80 * 7)  # ~7-query chunks
    sampler = StaticSampler(model, tok)
    chunked = sampler.sample(ps, cfg)
    assert sampler.stats["prefill_chunks"] > 3
    assert [c.token_ids for c in chunked] == [c.token_ids for c in base]
    monkeypatch.undo()
    eager_model, _ = load_policy(tiny_model_dir)
    eager_model.set_attn_implementation("eager")
    eager = StaticSampler(eager_model, tok).sample(ps, cfg)
    assert [c.token_ids for c in eager] == [c.token_ids for c in base]
    assert_teacher_forced(eager_model, ps, eager, 1.0)


def test_dispatch_and_local_policy_wiring(policy):
    model, tok = policy
    ps = prompts(tok)
    assert resolve_sampler(SamplingConfig(), model) == "hf"  # CPU model: auto = hf
    assert resolve_sampler(SamplingConfig(sampler="static"), model) == "static"
    cfg = SamplingConfig(max_new_tokens=8, seed=4, sampler="static")
    kept = StaticSampler(model, tok)
    assert [c.token_ids for c in sample_batch(model, tok, ps, cfg, static=kept)] == [
        c.token_ids for c in sample_completions(model, tok, ps, cfg)
    ]
    assert kept.stats  # the sampler passed in is the one that sampled
    pol = LocalPolicy(model, tok, cfg, static_sampler=kept)
    views = [type("V", (), {"max_new_tokens": 6, "context_ids": p})() for p in ps]
    comps = pol.act(views)
    assert pol.static_sampler is kept
    assert all(len(c.token_ids) <= 6 for c in comps)
    expected = sample_completions(model, tok, ps, dataclasses.replace(cfg, max_new_tokens=6))
    assert [c.token_ids for c in comps] == [c.token_ids for c in expected]


@pytest.mark.parametrize("sampler", ["hf", "static"])
def test_each_episode_keeps_its_own_turn_budget_in_a_batch(policy, sampler):
    """One episode near its context limit (budget 2) must not shorten the turns of the episodes batched
    with it: each row is the same sample a batch of its own budget would draw, cut at its own limit."""
    model, tok = policy
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=12, seed=9, sampler=sampler)
    budgets = [2, 12, 7]
    views = [type("V", (), {"max_new_tokens": b, "context_ids": p})() for p, b in zip(ps, budgets, strict=True)]
    comps = LocalPolicy(model, tok, cfg).act(views)
    full = sample_completions(model, tok, ps, cfg)  # the same seed, every row with the batch's longest budget
    assert any(len(c.token_ids) > 2 for c in full[1:])  # the sample is long enough for the test to mean something
    for c, f, budget in zip(comps, full, budgets, strict=True):
        assert c.token_ids == f.token_ids[:budget] and c.logprobs == pytest.approx(f.logprobs[:budget])
        assert c.finish == ("length" if len(f.token_ids) > budget else f.finish)
        assert c.text == tok.decode(list(c.token_ids), skip_special_tokens=True)


def test_bad_input_is_refused(policy):
    model, tok = policy
    assert StaticSampler(model, tok).sample([], SamplingConfig()) == []
    with pytest.raises(ValueError, match="at least one token"):
        StaticSampler(model, tok).sample([[]], SamplingConfig())
    with pytest.raises(ValueError, match="sampler"):
        SamplingConfig(sampler="vllm")  # type: ignore[arg-type]


def decode_attention_inputs(seed: int, length: int, keep: float, batch=3, heads=6, kv_heads=2, dim=8):
    """One decode query per row over `length` keys with 3 query heads per KV head: (module, q, k, v,
    allowed [B, 1, 1, L] boolean, bias: 0 where allowed, MASKED elsewhere); key 0 always allowed."""
    decode_attention.register_static_attention()
    g = torch.Generator().manual_seed(seed)
    module = type("M", (torch.nn.Module,), {})()
    module.num_key_value_groups, module.is_causal = heads // kv_heads, True
    q = torch.randn(batch, heads, 1, dim, generator=g)
    k, v = torch.randn(batch, kv_heads, length, dim, generator=g), torch.randn(batch, kv_heads, length, dim, generator=g)
    allowed = torch.rand(batch, 1, 1, length, generator=g) < keep
    allowed[..., 0] = True
    bias = torch.zeros(allowed.shape).masked_fill_(~allowed, decode_attention.MASKED)
    return module, q, k, v, allowed, bias


def test_decode_attention_matches_sdpa_with_grouped_heads():
    """static_decode_attention (K/V read per KV head, float key bias) = sdpa with repeated K/V and a
    boolean mask; a prefill or a boolean mask falls through to sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    module, q, k, v, allowed, bias = decode_attention_inputs(seed=0, length=11, keep=0.6)
    got, _ = decode_attention.static_decode_attention(module, q, k, v, bias, scaling=0.3)
    want, _ = sdpa_attention_forward(module, q, k, v, allowed, scaling=0.3)
    assert got.shape == want.shape == (3, 1, 6, 8)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    again, _ = decode_attention.static_decode_attention(module, q, k, v, allowed, scaling=0.3)  # boolean: sdpa
    torch.testing.assert_close(again, want)


def test_decode_steps_build_no_mask_and_leave_the_model_as_it_was(policy, monkeypatch):
    """Every decode step attends through STATIC_ATTENTION with the kept float bias (no boolean mask
    rebuilt per step); the prefill does not; the model's attention implementation is restored."""
    from transformers import AttentionInterface

    model, tok = policy
    before = model.config._attn_implementation
    sampler = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[]))
    seen = []

    def spy(module, query, key, value, mask, **kwargs):
        seen.append((query.shape[2], None if mask is None else mask.dtype, tuple(mask.shape)))
        return decode_attention.static_decode_attention(module, query, key, value, mask, **kwargs)

    AttentionInterface.register(decode_attention.STATIC_ATTENTION, spy)
    try:
        comps = sampler.sample(prompts(tok), SamplingConfig(max_new_tokens=7, seed=1))
    finally:
        AttentionInterface.register(decode_attention.STATIC_ATTENTION, decode_attention.static_decode_attention)
    layers = model.config.num_hidden_layers
    assert sampler.stats["decode_steps"] == 6 and len(seen) == 6 * layers
    assert {s[:2] for s in seen} == {(1, torch.float32)}
    assert {s[2] for s in seen} == {(3, 1, 1, sampler.stats["cache_length"])}
    assert model.config._attn_implementation == before
    assert_teacher_forced(model, prompts(tok), comps, 1.0)


@pytest.mark.parametrize("graph_steps,check,stop_first", [(8, 8, False), (3, 8, False), (8, 3, True), (1, 2, True)])
def test_block_decoding_draws_what_the_per_step_loop_draws(policy, graph_steps, check, stop_first):
    """Block decoding (the bookkeeping on the device, what a CUDA graph captures) against the per-step
    loop: the same ids, log-probs and number of decode steps, whatever the block size and the finish
    check, and with rows stopping early (the loop ends at the same check)."""
    model, tok = policy
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=21, seed=9)
    free = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], block_decode=False)).sample(ps, cfg)
    stop_ids = sorted({c.token_ids[2] for c in free}) if stop_first else []
    step = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=stop_ids, finish_check_every=check, block_decode=False))
    block = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=stop_ids, finish_check_every=check, block_decode=True,
                          graph_steps=graph_steps))
    a, b = step.sample(ps, cfg), block.sample(ps, cfg)
    assert [c.token_ids for c in a] == [c.token_ids for c in b] and [c.finish for c in a] == [c.finish for c in b]
    assert [c.logprobs for c in a] == [c.logprobs for c in b]
    assert step.stats["decode_steps"] == block.stats["decode_steps"]
    assert (step.stats["block_decode"], block.stats["block_decode"]) == ("off", "device loop")
    if stop_first:
        assert all(c.finish == "stop" for c in b) and block.stats["decode_steps"] < 20
    assert_teacher_forced(model, ps, b, 1.0)
    again = block.sample(ps[:1], cfg)  # the buffers are reused: nothing of the last call leaks in
    assert again[0].token_ids == step.sample(ps[:1], cfg)[0].token_ids


def test_block_decoding_traces_whole_and_serves_the_turn_cache(policy):
    """Compiled (eager backend, fullgraph) with dummy rows and a bucketed cache, and through
    sample_turns (the turn cache's rows, not in the call's order): the same tokens as the per-step loop."""
    model, tok = policy
    ps = prompts(tok)
    torch._dynamo.reset()
    compiled = {"compile": True, "compile_options": {"backend": "eager", "fullgraph": True, "mode": None}}
    cfg = SamplingConfig(max_new_tokens=12, seed=4)
    step = StaticSampler(model, tok, StaticSamplerConfig(block_decode=False, **compiled))
    block = StaticSampler(model, tok, StaticSamplerConfig(block_decode=True, graph_steps=4, **compiled))
    assert [c.token_ids for c in step.sample(ps, cfg)] == [c.token_ids for c in block.sample(ps, cfg)]
    assert block.stats["batch_bucket"] == 4 and block.stats["block_decode"] == "device loop"
    keys = ["x", "y", "z"]
    first = [step.sample_turns(keys, ps, cfg), block.sample_turns(keys, ps, cfg)]
    assert [c.token_ids for c in first[0]] == [c.token_ids for c in first[1]]
    longer = [list(p) + list(c.token_ids) for p, c in zip(ps, first[0], strict=True)]
    order = [2, 0]
    second = [s.sample_turns([keys[i] for i in order], [longer[i] for i in order], cfg) for s in (step, block)]
    assert [c.token_ids for c in second[0]] == [c.token_ids for c in second[1]]
    assert block.turns.counters["reused_tokens"] > 0


def test_block_decoding_refuses_what_it_cannot_do(policy):
    model, tok = policy
    with pytest.raises(ValueError, match="graph_steps"):
        StaticSampler(model, tok, StaticSamplerConfig(graph_steps=0))
    cpu = StaticSampler(model, tok)
    assert not cpu.block_decode and not cpu.capture  # on CPU, uncompiled: the per-step loop by default


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the GPU machine)")
def test_captured_blocks_draw_what_the_compiled_per_step_loop_draws(tiny_model_dir):
    """On a GPU: blocks captured as CUDA graphs (the default there) against the reduce-overhead per-step
    loop, both compiled, same seed: the same tokens, log-probs within float noise, graphs captured."""
    model, tok = load_policy(tiny_model_dir, dtype=torch.bfloat16, device="cuda")
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=40, seed=7)
    step = StaticSampler(model, tok, StaticSamplerConfig(block_decode=False))
    block = StaticSampler(model, tok)
    assert block.capture
    a = step.sample(ps, cfg)
    for _ in range(2):  # the first call captures, the second replays what it captured
        b = block.sample(ps, cfg)
        assert block.stats["block_decode"] == "graphs"
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-3, rtol=0)
    assert block.stats["graphs_captured"] == 0  # the second call replayed only

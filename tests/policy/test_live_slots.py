"""Live slots: the decode steps attend only the cache slots before the batch's newest one (rounded up to
live_bucket), and draw the same ids and log-probs as attending the whole cache (live_slots=False)."""

from __future__ import annotations

import pytest
import torch

from skillgate_core.policy.local_sampler import SamplingConfig, load_policy
from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig, decode_attention
from skillgate_core.policy.static.decoder import round_up


def prompts(tok):
    msgs = [[{"role": "user", "content": "list the files"}],
            [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "read /skills/a/SKILL.md"}],
            [{"role": "user", "content": "x"}]]
    return [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False) for m in msgs]


def assert_same_draws(a, b):
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    assert [c.finish for c in a] == [c.finish for c in b]
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-6, rtol=1e-6)


def test_a_cut_bias_reads_only_its_slots_and_gives_the_whole_cache_result():
    """static_decode_attention with the bias cut to n slots (every slot past n masked in the whole bias)
    gives what the whole bias gives, and reads only n slots: garbage past n changes nothing."""
    decode_attention.register_static_attention()
    g = torch.Generator().manual_seed(0)
    module = type("M", (torch.nn.Module,), {})()
    q = torch.randn(3, 6, 1, 8, generator=g)
    k, v = torch.randn(3, 2, 40, 8, generator=g), torch.randn(3, 2, 40, 8, generator=g)
    bias = torch.zeros(3, 1, 1, 40).masked_fill_(torch.rand(3, 1, 1, 40, generator=g) < 0.3, decode_attention.MASKED)
    bias[..., 0] = 0.0
    bias[..., 17:] = decode_attention.MASKED
    whole, _ = decode_attention.static_decode_attention(module, q, k, v, bias, scaling=0.3)
    k[:, :, 17:], v[:, :, 17:] = float("nan"), float("nan")  # what a live read never touches
    cut, _ = decode_attention.static_decode_attention(module, q, k, v, bias[..., :17], scaling=0.3)
    torch.testing.assert_close(cut, whole, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("shape,temperature,top_p,block", [
    ("policy", 1.0, 1.0, False), ("policy", 0.05, 1.0, False), ("policy", 1.0, 0.9, True),
    ("llama_policy", 1.0, 1.0, False), ("llama_policy", 0.05, 1.0, True)])
def test_live_slots_draw_what_the_whole_cache_draws(shape, temperature, top_p, block, request):
    """Sampled and near-greedy (T = 0.05), per-step loop and block decoding, Qwen2 and Llama (SmolLM2's
    shape): the same ids and log-probs with live slots as with the whole cache, and each step attends
    the prompt width + t slots rounded up to live_bucket, not the cache."""
    model, tok = request.getfixturevalue(shape)
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=30, temperature=temperature, top_p=top_p, seed=5)
    whole = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], live_slots=False, block_decode=block))
    live = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], live_bucket=4, block_decode=block))
    assert_same_draws(whole.sample(ps, cfg), live.sample(ps, cfg))
    width, length, steps = live.stats["prompt_width"], live.stats["cache_length"], live.stats["decode_steps"]
    assert whole.decoder.attended == [length] * steps
    if block:  # a block attends what its last step sees (graph_steps 8: blocks of t = 1..8, 9..16, ...)
        want = [min(length, round_up(width + min(t + 7 - (t - 1) % 8, steps), 4)) for t in range(1, steps + 1)]
    else:
        want = [min(length, round_up(width + t, 4)) for t in range(1, steps + 1)]
    assert live.decoder.attended == want
    assert live.stats["attended_slots_max"] == max(want) and live.stats["attended_slots_mean"] < length
    assert live.stats["kv_bytes_per_step"] < whole.stats["kv_bytes_per_step"] == whole.stats[
        "kv_bytes_per_step_whole_cache"]


def test_turn_cache_attends_live_slots_only(policy):
    """Through sample_turns (a 256-slot cache on CPU), two turns: the same draws as the whole cache, each
    step reading far fewer than the cache's slots, and the bytes per step computed from the shapes."""
    model, tok = policy
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=10, seed=2)
    whole = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], live_slots=False))
    live = StaticSampler(model, tok, StaticSamplerConfig(stop_ids=[], live_bucket=16))
    keys = ["a", "b", "c"]
    first = [s.sample_turns(keys, ps, cfg) for s in (whole, live)]
    assert_same_draws(*first)
    longer = [list(p) + list(c.token_ids) + list(p[-3:]) for p, c in zip(ps, first[0], strict=True)]
    second = [s.sample_turns(keys, longer, cfg) for s in (whole, live)]
    assert_same_draws(*second)
    stats = live.stats
    frontier, length = stats["frontier"], stats["cache_length"]
    assert stats["attended_slots_max"] == round_up(frontier, 16) < length == whole.stats["attended_slots_max"]
    keys_of_a_layer = live.turns.cache.layers[0].keys  # [rows, Hkv, L, D], the same in every layer
    per_slot = (2 * stats["batch_bucket"] * keys_of_a_layer.shape[1] * keys_of_a_layer.shape[3]
                * keys_of_a_layer.element_size() * model.config.num_hidden_layers)
    assert stats["kv_bytes_per_step"] == per_slot * stats["attended_slots_mean"]
    assert whole.stats["kv_bytes_per_step"] == per_slot * length


def test_compiled_live_slots_compile_the_step_once(policy):
    """Compiled (fullgraph) with block decoding: the attended length is marked dynamic, so the decode step
    compiles once for every length it meets (a graph per length would be one compile each), and draws
    what the uncompiled whole-cache loop draws."""
    model, tok = policy
    ps = prompts(tok)
    torch._dynamo.reset()
    compiles = []

    def counting(gm, example_inputs):
        compiles.append(len(example_inputs))
        return gm.forward

    cfg = SamplingConfig(max_new_tokens=24, seed=4)
    shapes = {"stop_ids": [], "compile": True, "block_decode": True, "graph_steps": 4, "length_bucket": 64,
              "compile_options": {"backend": counting, "fullgraph": True, "mode": None}}
    compiled = StaticSampler(model, tok, StaticSamplerConfig(live_bucket=4, **shapes))
    got = compiled.sample(ps, cfg)
    assert len(set(compiled.decoder.attended)) >= 4
    assert compiled.stats["attended_slots_max"] < compiled.stats["cache_length"]
    assert len(compiles) == 1
    torch._dynamo.reset()
    whole = StaticSampler(model, tok, StaticSamplerConfig(live_slots=False, **shapes))  # the same padded batch
    assert_same_draws(got, whole.sample(ps, cfg))
    torch._dynamo.reset()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the GPU machine)")
def test_captured_live_slot_blocks_draw_what_the_whole_cache_draws(tiny_llama_dir):
    """On a GPU (the defaults: compiled, blocks captured as CUDA graphs, fused projections), a cache far
    longer than the live part: live slots against the whole cache, same seed, same tokens, log-probs
    within bf16 noise; a graph per attended length, captured once and replayed on the next call."""
    model, tok = load_policy(tiny_llama_dir, dtype=torch.bfloat16, device="cuda")
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=40, seed=7)
    shapes = {"stop_ids": [], "min_cache_length": 2048, "live_bucket": 64}
    whole = StaticSampler(model, tok, StaticSamplerConfig(live_slots=False, **shapes))
    live = StaticSampler(model, tok, StaticSamplerConfig(**shapes))
    a = whole.sample(ps, cfg)
    for _ in range(2):
        b = live.sample(ps, cfg)
        assert live.stats["block_decode"] == "graphs"
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-3, rtol=0)
    assert live.stats["graphs_captured"] == 0 and live.stats["attended_slots_max"] < live.stats["cache_slots"]

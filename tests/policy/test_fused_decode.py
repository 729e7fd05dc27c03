"""The decode step with fused projections (policy.static.fused_decode) draws what the model's own forward
draws, follows the replica's weights when they change in place, and refuses models it cannot fuse."""

from __future__ import annotations

import copy

import pytest
import torch

from skillgate_core.policy.local_sampler import SamplingConfig, load_policy, sequence_logprobs
from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig
from skillgate_core.policy.static.fused_decode import FusedDecode, fusable


def prompts(tok):
    msgs = [[{"role": "user", "content": "list the files"}],
            [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "read /skills/a/SKILL.md"}],
            [{"role": "user", "content": "x"}]]
    return [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False) for m in msgs]


def same_draws(a, b, atol=1e-5):
    assert [c.token_ids for c in a] == [c.token_ids for c in b] and [c.finish for c in a] == [c.finish for c in b]
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=atol, rtol=0)


@pytest.mark.parametrize("shape", ["policy", "llama_policy"])
@pytest.mark.parametrize("block_decode", [False, True])
def test_fused_step_draws_what_the_models_forward_draws(shape, block_decode, request):
    """policy: Qwen2-shaped (q/k/v biases); llama_policy: SmolLM2's shape (none, 9 query heads over 3)."""
    model, tok = request.getfixturevalue(shape)
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=20, seed=11)
    plain = StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=False, block_decode=block_decode))
    fused = StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=True, block_decode=block_decode))
    a, b = plain.sample(ps, cfg), fused.sample(ps, cfg)
    assert (plain.stats["fused_decode"], fused.stats["fused_decode"]) == (False, True)
    same_draws(a, b)
    for prompt, c in zip(ps, b, strict=True):  # the recorded log-probs are the model's own
        torch.testing.assert_close(sequence_logprobs(model, prompt, c.token_ids, 1.0), torch.tensor(c.logprobs),
                                   atol=1e-5, rtol=0)


def test_fused_step_traces_whole_and_serves_the_turn_cache(policy):
    """Compiled (eager backend, fullgraph: what CUDA would capture) and through sample_turns."""
    model, tok = policy
    ps = prompts(tok)
    torch._dynamo.reset()
    compiled = {"compile": True, "compile_options": {"backend": "eager", "fullgraph": True, "mode": None}}
    cfg = SamplingConfig(max_new_tokens=10, seed=2)
    plain = StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=False, **compiled))
    fused = StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=True, block_decode=True, graph_steps=4, **compiled))
    same_draws(plain.sample(ps, cfg), fused.sample(ps, cfg))
    keys = ["a", "b", "c"]
    first = [s.sample_turns(keys, ps, cfg) for s in (plain, fused)]
    same_draws(*first)
    longer = [list(p) + list(c.token_ids) for p, c in zip(ps, first[0], strict=True)]
    same_draws(*[s.sample_turns(keys[1:], longer[1:], cfg) for s in (plain, fused)])
    assert fused.turns.counters["reused_tokens"] > 0 and fused.stats["fused_decode"]


def test_fused_step_follows_weights_changed_in_place(policy):
    """The trainer refreshes the replica in place between calls: the next call's tokens come from the new
    weights (the stacked copies are rewritten before every decode), not from the ones first stacked."""
    model, tok = policy
    replica = copy.deepcopy(model)
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=16, seed=5)
    fused = StaticSampler(replica, tok, StaticSamplerConfig(fuse_projections=True))
    before = fused.sample(ps, cfg)
    with torch.no_grad():
        for layer in replica.model.layers:  # what an optimizer step does to the weights, in place
            for lin in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                        layer.mlp.gate_proj, layer.mlp.up_proj):
                lin.weight.add_(torch.randn_like(lin.weight) * 0.5)
            if layer.self_attn.q_proj.bias is not None:
                layer.self_attn.v_proj.bias.add_(1.0)
    after = fused.sample(ps, cfg)
    same_draws(after, StaticSampler(replica, tok, StaticSamplerConfig(fuse_projections=False)).sample(ps, cfg))
    assert [c.token_ids for c in after] != [c.token_ids for c in before]


def test_models_it_cannot_fuse_keep_their_forward():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=64))
    assert "model_type 'gpt2'" in fusable(gpt2)
    assert FusedDecode.build(gpt2) is None
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        FusedDecode(gpt2)


def test_default_fuses_only_compiled_on_cuda_and_true_refuses_an_unfusable_model(policy, monkeypatch):
    model, tok = policy
    default = StaticSampler(model, tok)  # on the CPU: not compiled, so the model's forward decodes
    assert fusable(model) == "" and default.fused is None and "not compiled on CUDA" in default.fused_why_not
    assert StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=True)).fused is not None
    assert StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=False)).fused_why_not == "fuse_projections=False"
    monkeypatch.setattr("skillgate_core.policy.static.decoder.fusable", lambda m: "per-head q/k norms")
    with pytest.raises(ValueError, match="fuse_projections=True: .*per-head q/k norms"):
        StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=True))


def test_the_default_fuses_only_where_the_stacked_copies_fit_the_free_memory(llama_policy):
    """The copies are q/k/v and gate/up of every layer (weights and any biases); the default declines when
    they would take more than FREE_MEMORY_SHARE of the GPU's free memory, and says how much."""
    from skillgate_core.policy.static.fused_decode import FREE_MEMORY_SHARE, stacked_bytes, too_large

    model, _ = llama_policy
    cfg, layers = model.config, model.model.layers
    head = cfg.hidden_size // cfg.num_attention_heads
    rows = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * head + 2 * cfg.intermediate_size
    per_byte = next(model.parameters()).element_size()
    assert stacked_bytes(model) == len(layers) * rows * cfg.hidden_size * per_byte  # SmolLM2's shape: no biases
    need = stacked_bytes(model)
    assert too_large(model, free_bytes=int(need / FREE_MEMORY_SHARE) + 1) == ""
    why = too_large(model, free_bytes=int(need / FREE_MEMORY_SHARE) - 100)
    assert "would take more than 10% of the GPU's free memory" in why and "GiB" in why


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run on the GPU machine)")
def test_fused_on_a_gpu_draws_what_the_forward_draws(tiny_model_dir):
    """On a GPU, compiled with CUDA graphs (the defaults), fused: in float32 the same tokens as the
    model's forward (bf16 would differ by the GEMMs' rounding), log-probs within float noise."""
    model, tok = load_policy(tiny_model_dir, dtype=torch.float32, device="cuda")
    ps = prompts(tok)
    cfg = SamplingConfig(max_new_tokens=40, seed=7)
    plain = StaticSampler(model, tok, StaticSamplerConfig(fuse_projections=False))
    fused = StaticSampler(model, tok)  # the default on CUDA for a model it can fuse
    assert fused.fused is not None and fused.fused_why_not == ""
    a = plain.sample(ps, cfg)
    for _ in range(2):  # captures, then replays
        same_draws(a, fused.sample(ps, cfg), atol=1e-3)
        assert fused.stats["fused_decode"] and fused.stats["block_decode"] == "graphs"

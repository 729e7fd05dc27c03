"""Multi-turn KV reuse (policy.static.turn_cache) samples what a full prefill per turn samples: the same ids and,
up to float tolerance, the same log-probs for the same seeds, which teacher forcing reproduces; for one
episode over many turns, a lockstep batch whose episodes end at different turns, episodes that share
their prompt, lanes that call with a subset of the episodes, and contexts that do not extend the cache."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from skillgate_core.agent.episode import EpisodeView
from skillgate_core.agent.policies import LocalPolicy
from skillgate_core.policy.local_sampler import SamplingConfig, sample_completions, sequence_logprobs
from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig


def chat(tok, text: str) -> list[int]:
    return tok.apply_chat_template([{"role": "system", "content": "You are an agent."},
                                    {"role": "user", "content": text}], add_generation_prompt=True, tokenize=True,
                                   return_dict=False)


def observation(tok, turn: int, episode: int) -> list[int]:
    """Observation glue of different lengths per episode and turn (agent.episode.OBSERVATION_TEMPLATE)."""
    body = " ".join(["ok"] * (1 + (3 * episode + turn) % 5))
    return tok(f"\n<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]


def same(full, cached, model=None, contexts=None, temperature=1.0):
    assert [c.token_ids for c in cached] == [c.token_ids for c in full]
    assert [c.finish for c in cached] == [c.finish for c in full]
    for a, b in zip(full, cached, strict=True):
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-5, rtol=0)
    if model is not None:  # the recorded log-probs are the trainer's (teacher forcing on the whole context)
        for context, c in zip(contexts, cached, strict=True):
            want = sequence_logprobs(model, context, c.token_ids, temperature)
            torch.testing.assert_close(torch.tensor(c.logprobs), want, atol=1e-5, rtol=0)


def play(model, tok, prompts, turns, *, ends=None, sampler_kwargs=None, subsets=None, temperature=1.0, new=10,
         reference_kwargs=None):
    """Play len(prompts) episodes for `turns` lockstep turns with a full prefill per turn (the reference)
    and with the turn cache, the same seeds; every turn must agree. ends[e]: the turn after which episode
    e ends (its rows released); subsets(turn, live): the episodes of each call (lanes)."""
    full = StaticSampler(model, tok, StaticSamplerConfig(**(reference_kwargs or {})))
    cached = StaticSampler(model, tok, StaticSamplerConfig(**(sampler_kwargs or {})))
    contexts = {e: list(p) for e, p in enumerate(prompts)}
    live = list(contexts)
    cached.shapes_seen = set()  # (batch bucket, cache length) of every call
    for turn in range(turns):
        calls = subsets(turn, live) if subsets else [live]
        for part, call in enumerate(calls):
            cfg = SamplingConfig(max_new_tokens=new + turn, seed=100 * turn + part, temperature=temperature)
            ctx = [contexts[e] for e in call]
            a = full.sample(ctx, cfg)
            b = cached.sample_turns(call, ctx, cfg)
            cached.shapes_seen.add((cached.stats["batch_bucket"], cached.stats["cache_length"]))
            same(a, b, model if turn in (0, turns - 1) else None, ctx, temperature)
            for e, c in zip(call, b, strict=True):
                contexts[e] = contexts[e] + list(c.token_ids) + observation(tok, turn, e)
        done = [e for e in live if ends and ends.get(e) == turn]
        cached.turns.release(done)
        live = [e for e in live if e not in done]
    return cached


@pytest.mark.parametrize("shape", ["policy", "llama_policy"])
def test_one_episode_over_many_turns_prefills_only_what_each_turn_adds(shape, request):
    model, tok = request.getfixturevalue(shape)
    prompt = chat(tok, "list the files in the workspace and read /skills/a/SKILL.md")
    cached = play(model, tok, [prompt], turns=5, temperature=0.8)
    n = cached.turns.counters
    assert n["calls"] == 5 and n["fallbacks"] == 0 and n["invalidated_rows"] == 0
    assert n["reused_tokens"] > 4 * len(prompt)  # every later turn kept at least the prompt
    # prefilled: the prompt once, then per turn what the context added (a turn's last sampled token
    # is fed by no decode step when the turn ends at the budget: at most one per turn)
    added = sum(len(observation(tok, t, 0)) for t in range(4))
    assert len(prompt) + added <= n["prefilled_tokens"] <= len(prompt) + added + 4


def test_a_lockstep_batch_whose_episodes_end_at_different_turns(policy):
    """Episodes 1 and 3 end early (rows freed, the batch shrinks and is laid out anew); a small length
    bucket makes the cache grow (relayouts into a longer cache)."""
    model, tok = policy
    prompts = [chat(tok, t) for t in ("x", "read the skill", "run the tests and fix the bug", "ls")]
    cached = play(model, tok, prompts, turns=5, ends={1: 0, 3: 2}, sampler_kwargs={"length_bucket": 32})
    n = cached.turns.counters
    assert n["relayouts"] >= 2 and n["fallbacks"] == 0
    assert {b for b, _ in cached.shapes_seen} == {4, 3, 2} and len({n for _, n in cached.shapes_seen}) >= 2
    assert n["rows"] == 4 + 3 + 3 + 2 + 2
    assert cached.turns.held() == 2 and len(cached.turns.rows) == 2


def test_episodes_that_share_their_prompt_prefill_it_once(policy):
    """Two groups of three: each group's prompt is prefilled once and copied into its rows."""
    model, tok = policy
    a, b = chat(tok, "group a task"), chat(tok, "another task for group b, longer")
    sampler = StaticSampler(model, tok)
    cfg = SamplingConfig(max_new_tokens=12, seed=7)
    prompts = [a, a, b, a, b, b]
    cached = sampler.sample_turns(list(range(6)), prompts, cfg)
    same(StaticSampler(model, tok).sample(prompts, cfg), cached, model, prompts)
    assert len({c.token_ids for c in cached}) > 2  # the copies sample apart
    n = sampler.turns.counters
    assert n["prefilled_tokens"] == len(a) + len(b) and n["shared_tokens"] == 2 * len(a) + 2 * len(b)
    assert sampler.stats["fresh_distinct"] == 2
    # and the groups play on from their copies
    play(model, tok, prompts, turns=3)


def test_lanes_calling_with_some_of_the_episodes(policy):
    """Merged lanes: each call holds a different subset; the absent episodes' rows ride along untouched."""
    model, tok = policy
    prompts = [chat(tok, t) for t in ("one", "two two", "three three three", "four")]

    def subsets(turn, live):
        return [[e for e in live if e % 2 == turn % 2], [e for e in live if e % 2 != turn % 2]]

    cached = play(model, tok, prompts, turns=4, subsets=subsets, sampler_kwargs={"length_bucket": 64})
    assert cached.turns.counters["fallbacks"] == 0 and cached.turns.counters["reused_tokens"] > 0


def test_a_context_that_does_not_extend_the_cache_falls_back_for_that_episode(policy):
    model, tok = policy
    prompts = [chat(tok, "first"), chat(tok, "second one")]
    sampler, cfg = StaticSampler(model, tok), SamplingConfig(max_new_tokens=8, seed=1)
    first = sampler.sample_turns([0, 1], prompts, cfg)
    # episode 0 goes on as the loop would; episode 1's context is re-rendered differently after its prompt
    contexts = [prompts[0] + list(first[0].token_ids) + observation(tok, 0, 0),
                prompts[1][:-2] + observation(tok, 0, 1)]
    cfg2 = dataclasses.replace(cfg, seed=2)
    again = sampler.sample_turns([0, 1], contexts, cfg2)
    same(StaticSampler(model, tok).sample(contexts, cfg2), again, model, contexts)
    n = sampler.turns.counters
    assert n["fallbacks"] == 1 and n["fallback_tokens"] >= 2


def test_new_weights_or_a_new_owner_start_from_no_rows(policy, tiny_model_dir):
    from skillgate_core.policy.local_sampler import load_policy

    model, tok = load_policy(tiny_model_dir)  # a copy: its weights are changed below
    prompt = chat(tok, "a task")
    sampler, cfg = StaticSampler(model, tok), SamplingConfig(max_new_tokens=6, seed=3)
    out = sampler.sample_turns(["e"], [prompt], cfg, owner="step0")
    context = prompt + list(out[0].token_ids) + observation(tok, 0, 0)
    with torch.no_grad():
        next(model.parameters()).mul_(1.5)  # an in-place refresh, as engine.refresh_replica does
    again = sampler.sample_turns(["e"], [context], cfg, owner="step0")
    same(StaticSampler(model, tok).sample([context], cfg), again, model, [context])
    n = sampler.turns.counters
    assert n["invalidated_rows"] == 1 and n["reused_tokens"] == 0
    sampler.sample_turns(["e"], [context], cfg, owner="step1")
    assert sampler.turns.counters["invalidated_rows"] == 2


def test_the_compiled_step_traces_whole_with_the_turn_cache(policy):
    """Compiled (eager backend, fullgraph: what CUDA would capture): dummy rows, a bucketed batch and cache,
    rows that are not in the call's order. Compiled, every row of the batch draws (a static shape), the
    call's first, as the compiled `sample` does with its dummy rows: so against a compiled full prefill
    of the same batch bucket, the same ids and log-probs."""
    model, tok = policy
    torch._dynamo.reset()
    compiled = {"compile": True, "compile_options": {"backend": "eager", "fullgraph": True, "mode": None},
                "min_batch": 4}
    prompts = [chat(tok, t) for t in ("one", "two two", "three")]
    cached = play(model, tok, prompts, turns=3, ends={0: 0}, subsets=lambda turn, live: [list(reversed(live))],
                  sampler_kwargs={**compiled, "length_bucket": 64}, reference_kwargs=compiled)
    assert cached.stats["batch_bucket"] == 4 and cached.stats["compiled"]


def test_local_policy_keeps_rows_per_episode_and_frees_ended_ones(policy):
    model, tok = policy
    prompts = [chat(tok, "a"), chat(tok, "a"), chat(tok, "b")]
    views = [EpisodeView(None, [], list(p), 0, 8) for p in prompts]  # type: ignore[arg-type]
    cfg = SamplingConfig(max_new_tokens=8, seed=5, sampler="static")
    pol = LocalPolicy(model, tok, cfg)
    out = pol.act(views)
    assert [c.token_ids for c in out] == [c.token_ids for c in sample_completions(model, tok, prompts, cfg)]
    for v, c in zip(views, out, strict=True):
        v.context_ids += list(c.token_ids) + observation(tok, 0, 1)
    views[1].ended = True
    out2 = pol.act([views[0], views[2]])
    assert pol.static_sampler.turns.held() == 2
    counters = pol.cache_counters()
    assert counters["reused_tokens"] > 0 and counters["shared_tokens"] == len(prompts[0])  # the second "a" copied the first
    off = LocalPolicy(model, tok, dataclasses.replace(cfg, reuse_kv=False))
    off._calls = 1
    assert [c.token_ids for c in off.act([views[0], views[2]])] == [c.token_ids for c in out2]
    assert off.static_sampler.turns.counters["calls"] == 0


def test_a_turn_cache_that_raises_is_switched_off_and_the_turn_sampled_in_full(policy, monkeypatch):
    """A defect in the cache met first on a new machine must not end a training run: that turn and every
    later one are sampled with the full prefill (the same completions), and the failure is counted."""
    model, tok = policy
    prompts = [chat(tok, "a"), chat(tok, "b")]
    views = [EpisodeView(None, [], list(p), 0, 8) for p in prompts]  # type: ignore[arg-type]
    cfg = SamplingConfig(max_new_tokens=8, seed=5, sampler="static")
    pol = LocalPolicy(model, tok, cfg)
    pol.static_sampler = StaticSampler(model, tok)

    def broken(*args, **kwargs):
        raise RuntimeError("cache row out of range")

    monkeypatch.setattr(pol.static_sampler.turns, "sample", broken)
    with pytest.warns(RuntimeWarning, match="turn cache switched off after: RuntimeError: cache row out of range"):
        out = pol.act(views)
    assert [c.token_ids for c in out] == [c.token_ids for c in sample_completions(model, tok, prompts, cfg)]
    turns = pol.static_sampler.turns
    assert not turns.supported and turns.disabled_reason == "RuntimeError: cache row out of range"
    assert pol.cache_counters()["failures"] == 1
    pol.act(views)  # later turns never try the cache again
    assert pol.cache_counters()["failures"] == 1

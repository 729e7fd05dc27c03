"""Batched sampling where each row draws from its own seeded stream (evaluation's sampler).

`local_sampler.sample_completions` seeds one global generator per batch, so a row's tokens depend on
which other rows share its batch. Evaluation needs each trial to be a function of its own seed (so
an interrupted evaluation resumed with a different batch make-up gives the same trials), so here
every row has a CPU `torch.Generator` seeded with its seed and draws exactly one uniform per step
(finished rows too, so the streams never shift), and the token is the inverse CDF of the tempered,
top-p-filtered distribution at that uniform. Rows are decoded together with a KV cache, left-padded;
the recorded log-prob is log_softmax(logits / temperature), as in local_sampler.

    [c] = sample_seeded(model, tok, [prompt_ids], seeds=[1234], config=SamplingConfig(max_new_tokens=64))
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from skillgate_core.policy.local_sampler import Completion, SamplingConfig, stop_token_ids

if TYPE_CHECKING:
    import torch

__all__ = ["sample_seeded"]


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail outside the smallest set of tokens holding `top_p` mass (the first token always stays)."""
    import torch

    sorted_p, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p
    sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, sorted_p)


def _forward_names(model: Any) -> tuple[str, bool]:
    """(the cache keyword of model.forward: `cache` in transformers >= 5.x, else `past_key_values`;
    whether it takes `logits_to_keep`, so the prefill computes logits for the last position only)."""
    params = inspect.signature(model.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def _cache_of(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def sample_seeded(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    seeds: Sequence[int],
    config: SamplingConfig,
    max_new_tokens: Sequence[int] | None = None,
) -> list[Completion]:
    """One completion per prompt; row i's tokens depend only on prompt i, seeds[i], its token limit
    (`max_new_tokens[i]`, default config.max_new_tokens) and `config`'s temperature and top-p."""
    import torch

    if len(prompts) != len(seeds):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    limits = [config.max_new_tokens] * len(prompts) if max_new_tokens is None else [int(n) for n in max_new_tokens]
    if len(limits) != len(prompts) or min(limits, default=1) < 1:
        raise ValueError(f"max_new_tokens: expected {len(prompts)} limits >= 1, got {max_new_tokens}")
    if not prompts:
        return []
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rows, width = len(prompts), max(len(p) for p in prompts)
    input_ids = torch.full((rows, width), pad, dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    for r, prompt in enumerate(prompts):
        input_ids[r, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        attention[r, width - len(prompt):] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    stop = set(stop_token_ids(tokenizer))
    generators = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]
    ids: list[list[int]] = [[] for _ in range(rows)]
    logps: list[list[float]] = [[] for _ in range(rows)]
    done = [False] * rows
    attention, positions = attention.to(device), positions.to(device)
    cache_kw, keep_last = _forward_names(model)
    with torch.no_grad():
        out = model(input_ids=input_ids.to(device), attention_mask=attention, position_ids=positions, use_cache=True,
                    **({"logits_to_keep": 1} if keep_last else {}))
        for _ in range(max(limits)):
            logp = torch.log_softmax(out.logits[:, -1, :].float() / config.temperature, dim=-1)
            probs = logp.exp()
            if config.top_p < 1.0:
                probs = _top_p(probs, config.top_p)
            cdf = probs.cumsum(-1)
            uniforms = torch.tensor([float(torch.rand((), generator=g)) for g in generators], device=device)
            target = (uniforms * cdf[:, -1]).unsqueeze(-1)
            chosen = torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
            chosen_lp = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).cpu().tolist()
            chosen_ids = chosen.cpu().tolist()
            for r in range(rows):
                if done[r]:
                    continue
                ids[r].append(chosen_ids[r])
                logps[r].append(float(chosen_lp[r]))
                done[r] = chosen_ids[r] in stop or len(ids[r]) >= limits[r]
            if all(done):
                break
            step = torch.tensor([pad if done[r] else chosen_ids[r] for r in range(rows)], dtype=torch.long)
            attention = torch.cat([attention, torch.ones((rows, 1), dtype=torch.long, device=device)], dim=-1)
            positions = positions[:, -1:] + 1
            out = model(input_ids=step.unsqueeze(-1).to(device), attention_mask=attention, position_ids=positions,
                        use_cache=True, **{cache_kw: _cache_of(out)})
    completions = []
    for r in range(rows):
        finish: Literal["stop", "length"] = "stop" if ids[r] and ids[r][-1] in stop else "length"
        completions.append(Completion(token_ids=tuple(ids[r]), logprobs=tuple(logps[r]),
                                      text=tokenizer.decode(ids[r], skip_special_tokens=True), finish=finish))
    return completions

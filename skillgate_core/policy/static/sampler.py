"""Fast batched sampling for the colocated replica: a static KV cache and a compiled decode step.

The same contract as `local_sampler.sample_completions` (ids, tempered per-token log-probs, finish =
stop | length; nothing re-tokenized), without transformers' `generate`, whose per-token host work
makes it launch-bound on a GPU (docs/gpu.md, Anchors: 452 tokens/s at batch 32 on an H200, where a
compiled static-cache decode loop reaches 10.7k). Here `StaticSampler` lays out one left-padded
batch (or, through `sample_turns`, the episodes' cache rows: `turn_cache`) and `decoder.StaticDecoder`
prefills and decodes it; how (the lock-step slots, the mask-free decode step, block decoding, the
shape buckets) is the decoder's docstring. Its switches are one frozen `StaticSamplerConfig`
(policy.static.config).

On CPU nothing is compiled or bucketed, so for one seed the ids equal `local_sampler`'s (same RNG
calls on the same probabilities, up to the float summation order of attention over a longer cache)
and the log-probs match teacher forcing (tests/policy/test_static_sampler.py).

    sampler = StaticSampler(replica, tokenizer)          # once per replica: caches + compiled step
    comps = sampler.sample(prompts, SamplingConfig(max_new_tokens=512, seed=3))
    comps = sample_batch(replica, tokenizer, prompts, config, static=sampler)   # dispatch on config.sampler

Multi-turn episodes keep their KV cache across turns through `sample_turns` (policy.static.turn_cache: a
turn prefills only what its context added; a group's shared prompt is prefilled once):

    comps = sampler.sample_turns(episode_keys, contexts, config, owner=policy_id)

Whoever samples a replica keeps its one StaticSampler and passes it on (the trainer hands it to every
step's LocalPolicy): nothing here keeps samplers behind the caller's back.

`generation_config` extras of the checkpoint (repetition penalty, top-k, ...) are NOT applied: the
policy trained by GRPO is plain tempered sampling (top-p 1.0, docs/method.md 2), which both samplers
implement; `local_sampler` passes top_k=0 for the same reason.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Literal

import torch

from skillgate_core.policy.local_sampler import Completion, SamplingConfig, sample_completions
from skillgate_core.policy.static.config import StaticSamplerConfig
from skillgate_core.policy.static.decoder import StaticDecoder, bucket_batch, round_up
from skillgate_core.policy.static.fused_decode import FusedDecode
from skillgate_core.policy.static.shared_prefix import sample_grouped
from skillgate_core.policy.static.turn_cache import TurnCache

__all__ = ["StaticSampler", "resolve_sampler", "sample_batch"]


def resolve_sampler(config: SamplingConfig, model: Any) -> Literal["hf", "static"]:
    """The sampler `config.sampler` names; auto = static when the model is on CUDA, else hf."""
    if config.sampler != "auto":
        return config.sampler
    return "static" if next(model.parameters()).device.type == "cuda" else "hf"


def sample_batch(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], config: SamplingConfig,
                 *, static: StaticSampler | None = None) -> list[Completion]:
    """One completion per prompt, by the sampler `config.sampler` selects (see `resolve_sampler`).

    static: the replica's StaticSampler, used when the static sampler is selected (keep one per replica
    and pass it: its caches and compiled decode graphs are what make it fast); None makes a fresh one."""
    if resolve_sampler(config, model) == "static":
        return (static or StaticSampler(model, tokenizer)).sample(prompts, config)
    return sample_completions(model, tokenizer, prompts, config)


class StaticSampler:
    """Batched sampling with a static KV cache and (on CUDA) a CUDA-graph decode step; see the module
    docstring. Not thread-safe: one `sample` call at a time per replica."""

    def __init__(self, model: Any, tokenizer: Any, config: StaticSamplerConfig | None = None) -> None:
        """One sampler per replica (its caches and compiled decode graphs are what make it fast); `config`:
        its switches, each documented in StaticSamplerConfig (None = the defaults)."""
        self.config = config or StaticSamplerConfig()
        self.decoder = StaticDecoder(model, tokenizer, self.config)
        """The replica's prefill and decode (caches, compiled step, graphs), shared with `turns`."""
        self.turns = TurnCache(self.decoder)
        """The episodes' cache rows kept across turns (`sample_turns`)."""
        self.stats: dict[str, Any] = {}
        """What the last call did: batch / cache buckets, decode steps, prefill chunks."""

    # --- what the decoder decided (read live: a failed capture switches block decoding off for good) --

    @property
    def compiled(self) -> bool:
        return self.decoder.compiled

    @property
    def block_decode(self) -> bool:
        return self.decoder.block_decode

    @property
    def capture(self) -> bool:
        return self.decoder.capture

    @property
    def fused(self) -> FusedDecode | None:
        return self.decoder.fused

    @property
    def fused_why_not(self) -> str:
        return self.decoder.fused_why_not

    @property
    def pad_id(self) -> int:
        return self.decoder.pad_id

    def decode_stats(self) -> dict[str, Any]:
        """Which decode step samples: fused or the model's forward, and why (also in `stats`)."""
        return self.decoder.decode_stats()

    # --- one batch --------------------------------------------------------------------------------

    def sample(self, prompts: Sequence[Sequence[int]], config: SamplingConfig) -> list[Completion]:
        """Sample one completion per prompt (prompt = token ids); see the module docstring."""
        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if self.config.shared_prefix:
            completions, self.stats = sample_grouped(self.decoder, prompts, config)
            return completions
        n, new = len(prompts), config.max_new_tokens
        width = max(len(p) for p in prompts)
        batch = bucket_batch(max(n, self.config.min_batch)) if self.compiled else n
        length = width + new
        if self.compiled:
            length = round_up(max(length, self.config.min_cache_length), self.config.length_bucket)
        ids = torch.full((batch, width), self.decoder.pad_id, dtype=torch.long)
        valid = torch.ones((batch, length), dtype=torch.bool)
        valid[:, :width] = False
        pad = torch.full((batch,), width - 1, dtype=torch.long)  # dummy rows: one pad "prompt" token
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            valid[row, width - len(prompt) : width] = True
            pad[row] = width - len(prompt)
        valid[n:, width - 1] = True
        device = self.decoder.device
        ids, valid, pad = ids.to(device), valid.to(device), pad.to(device)

        self.decoder.ready_thread()
        with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(config.seed)
            cache, bias = self.decoder.bucket_cache(batch, length)
            out_ids, out_lp, steps, chunks = self._generate(ids, valid, pad, cache, bias, config, n)
        self.stats = {"batch": n, "batch_bucket": batch, "prompt_width": width, "cache_length": length,
                      "decode_steps": steps, "prefill_chunks": chunks, "compiled": self.compiled,
                      **self.decoder.decode_stats(), **self.decoder.block_stats,
                      **self.decoder.attention_stats(cache, batch)}
        return self.decoder.completions(out_ids[:n].cpu(), out_lp[:n].cpu(), new)

    def sample_turns(self, keys: Sequence[Hashable], contexts: Sequence[Sequence[int]], config: SamplingConfig,
                     owner: Hashable = None) -> list[Completion]:
        """`sample` for multi-turn episodes: contexts[i] is episode keys[i]'s whole context so far, and only
        what it adds to what that episode's cache row holds is prefilled (policy.static.turn_cache). The same
        completions as `sample(contexts, config)`, up to float summation order. Release an ended
        episode's row with `self.turns.release([key])`; `owner`: rows of another owner are dropped."""
        self.decoder.ready_thread()
        out = self.turns.sample(keys, contexts, config, owner)
        self.stats = (dict(self.turns.stats) | self.decoder.decode_stats() | self.decoder.block_stats
                      | self.decoder.attention_stats(self.turns.cache, len(self.turns.rows)))
        return out

    def _generate(self, ids, valid, pad, cache, bias, config: SamplingConfig, rows: int):
        batch, width = ids.shape
        logits, chunks = self.decoder.prefill(ids, 0, pad, valid, cache)
        order = torch.arange(batch, device=ids.device)
        done = torch.zeros(batch, dtype=torch.bool, device=ids.device)
        done[rows:] = True  # dummy rows never hold the loop open
        out_ids, out_lp, steps = self.decoder.decode(logits, width, pad, valid, cache, bias, config, done, order)
        return out_ids, out_lp, steps, chunks

"""Shared-prefix sampling: the rows that share a prompt keep its K/V once (`StaticSamplerConfig.shared_prefix`).

A GRPO group samples one prompt G times. `StaticSampler.sample` otherwise lays out G left-padded copies of
it, prefills each and reads each copy's keys and values at every decode step. Here (`sample_grouped`):

- the distinct prompts are the groups; each is prefilled once, left padded to the widest, into a prefix
  cache [groups, Hkv, P, D] (its last logits give every row of the group its first draw);
- the rows are laid out group by group (row g * R + r is row r of group g; R = the largest group, the
  smaller ones padded with dummy rows that never hold the loop open), and each row's own cache holds its
  sampled tokens only, from slot 0 (position = slot + the prompt's length);
- every decode step attends a row's own slots and its group's prompt as two partial softmaxes merged by
  their log-sum-exp (`decode_attention.merge_partial_attention`): exact up to float rounding. A group's
  rows attend its prompt in one batched product, so the prompt is read once per group, not per row;
- the draws are the caller's rows in the caller's order (`StaticDecoder._draw`), so a seed draws what
  `sample` draws without the sharing (tests/policy/test_shared_prefix.py).

Compiled, the groups and the rows per group are each rounded up to a power of two and the prefix to
`length_bucket` (its masked tail read: one shape per bucket, the captured graphs keyed by the prefix).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from skillgate_core.policy.local_sampler import Completion, SamplingConfig
from skillgate_core.policy.static.decode_attention import MASKED, SharedPrefix, kv_read_bytes, shared_prefix
from skillgate_core.policy.static.decoder import StaticDecoder, bucket_batch, round_up

__all__ = ["group_rows", "sample_grouped"]


def group_rows(prompts: Sequence[Sequence[int]], compiled: bool) -> tuple[list[list[int]], list[int], int, int]:
    """(the distinct prompts in first-seen order, each prompt's row in the grouped layout, rows per group,
    groups in the layout): row g * R + r is the r-th prompt equal to distinct prompt g."""
    index: dict[tuple[int, ...], int] = {}
    for p in prompts:
        index.setdefault(tuple(p), len(index))
    counts = [0] * len(index)
    for p in prompts:
        counts[index[tuple(p)]] += 1
    per_group = bucket_batch(max(counts)) if compiled else max(counts)
    groups = bucket_batch(len(index)) if compiled else len(index)
    seen = [0] * len(index)
    rows = []
    for p in prompts:
        g = index[tuple(p)]
        rows.append(g * per_group + seen[g])
        seen[g] += 1
    return [list(d) for d in index], rows, per_group, groups


def sample_grouped(decoder: StaticDecoder, prompts: Sequence[Sequence[int]],
                   config: SamplingConfig) -> tuple[list[Completion], dict[str, Any]]:
    """One completion per prompt with each distinct prompt's K/V kept once (module docstring); (the
    completions, the call's stats)."""
    s = decoder
    distinct, rows, per_group, groups = group_rows(prompts, s.compiled)
    batch, new = groups * per_group, config.max_new_tokens
    width = max(len(p) for p in distinct)
    prefix_length = round_up(width, s.config.length_bucket) if s.compiled else width
    own_length = round_up(max(new, s.config.min_cache_length), s.config.length_bucket) if s.compiled else new
    ids = torch.full((groups, width), s.pad_id, dtype=torch.long)
    valid = torch.zeros((groups, prefix_length), dtype=torch.bool)
    pad = torch.full((groups,), width - 1, dtype=torch.long)
    valid[len(distinct):, width - 1] = True  # dummy groups: one pad "prompt" token
    for g, prompt in enumerate(distinct):
        ids[g, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
        valid[g, width - len(prompt):width] = True
        pad[g] = width - len(prompt)
    device = s.device
    ids, valid, pad = ids.to(device), valid.to(device), pad.to(device)
    group_of_row = torch.arange(batch, device=device) // per_group
    order = list(rows)
    if s.compiled:  # a static shape: every row draws, the caller's first
        order += [i for i in range(batch) if i not in set(rows)]
    s.ready_thread()
    with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(config.seed)
        prefix_cache, prefix_bias = s.bucket_cache(groups, prefix_length, role="prefix")
        logits, chunks = s.prefill(ids, 0, pad, valid, prefix_cache)
        prefix_bias.fill_(MASKED)
        prefix_bias[:, 0, 0, :].masked_fill_(valid, 0.0)
        own_cache, own_bias = s.bucket_cache(batch, own_length, role="own")
        # a row's own slot t holds the token at position len(prompt) + t: offset = -len(prompt)
        offset = (pad - width).index_select(0, group_of_row)
        done = torch.ones(batch, dtype=torch.bool, device=device)
        done[rows] = False  # dummy rows never hold the loop open
        attended_prefix = prefix_length if s.compiled else width  # compiled: one shape per prefix bucket
        prefix = SharedPrefix(prefix_cache, prefix_bias[..., :attended_prefix], per_group)
        with shared_prefix(prefix):
            out_ids, out_lp, steps = s.decode(logits.index_select(0, group_of_row), 0, offset,
                                              torch.zeros((batch, own_length), dtype=torch.bool, device=device),
                                              own_cache, own_bias, config, done, torch.tensor(order, device=device))
    own = s.attention_stats(own_cache, batch)
    prefix_bytes = kv_read_bytes(prefix_cache, groups, attended_prefix)
    stats = {"batch": len(prompts), "batch_bucket": batch, "prompt_width": width, "cache_length": own_length,
             "decode_steps": steps, "prefill_chunks": chunks, "compiled": s.compiled, **s.decode_stats(),
             **s.block_stats, **own,
             "shared_prefix": {"groups": len(distinct), "groups_bucket": groups, "rows_per_group": per_group,
                               "prefix_slots": attended_prefix},
             "kv_bytes_per_step": own["kv_bytes_per_step"] + prefix_bytes,
             # what the same rows read with a copy of the prompt each (and the live slots): the sharing's gain
             "kv_bytes_per_step_unshared": own["kv_bytes_per_step"] + kv_read_bytes(prefix_cache, 1, width) * len(prompts)}
    return s.completions(out_ids[rows].cpu(), out_lp[rows].cpu(), new), stats

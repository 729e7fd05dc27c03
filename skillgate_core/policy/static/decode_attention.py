"""The decode steps' attention: one query per row against the live part of the static cache, K/V read once.

The static sampler's decode step (and the fused one, `fused_decode`) builds no mask: a float32
additive key bias [B, 1, 1, L] is kept with the cache (0 for a key the query sees, MASKED elsewhere),
and the step attends with `static_decode_attention`, registered with transformers as the attention
implementation STATIC_ATTENTION for the decode steps only. The query heads are grouped over their KV
head, so K/V are read once per KV head and never repeated to the query heads (transformers' sdpa path
repeats them whenever a mask is given, and rebuilt the mask in every layer of every step: half the
decode step's GPU time on an H200). Anything else (a prefill, a boolean mask) goes to sdpa.

Live slots (`StaticSamplerConfig.live_slots`, on by default): the decoder passes the bias cut to the
first n slots (n: the batch's newest slot, rounded up to `live_bucket`), and only those n slots of K/V
are read. Every slot past n is masked for every row, and a masked score adds exp(MASKED - max) = 0
exactly in float32, so the probabilities are those of the whole cache (up to float summation order).
`kv_read_bytes` is what one decode step reads of the cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["MASKED", "STATIC_ATTENTION", "SharedPrefix", "kv_read_bytes", "merge_partial_attention",
           "register_static_attention", "shared_prefix", "shared_prefix_key", "static_decode_attention"]

STATIC_ATTENTION = "skillgate_static_decode"
"""The attention implementation name the decode steps run under (see `static_decode_attention`)."""

MASKED = torch.finfo(torch.float32).min
"""The key bias of a key a query must not see (finite: a score plus it never overflows)."""


def static_decode_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                            **kwargs: Any) -> tuple[torch.Tensor, None]:
    """One query per row against the first n slots of the static cache, for a float additive key bias
    [B, 1, 1, n] (n = L: the whole cache).

    query [B, H, 1, D], key / value [B, Hkv, L, D] (only the first n slots are read): the H query heads are grouped by their KV head
    ([B, Hkv, H / Hkv, D]) so each KV head is read once (no repeat_kv), scores = q k^T * scaling in
    the model dtype (what eager attention does), + bias in float32, softmax in float32, then the
    weighted values. Anything else (a prefill, a boolean mask, no mask) goes to transformers' sdpa."""
    if query.shape[2] != 1 or attention_mask is None or attention_mask.dtype == torch.bool:
        return _SDPA[0](module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    if _PREFIX:
        return _with_shared_prefix(module, query, key, value, attention_mask, scaling, _PREFIX[-1]), None
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    # live slots: a bias shorter than the cache (the decoder's `live_bias`) says how many slots the step
    # attends; the rest are masked for every row, so the slices below read only what is live
    attended = attention_mask.shape[-1]
    key, value = key[:, :, :attended], value[:, :, :attended]
    scale = scaling if scaling is not None else dim ** -0.5
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(q, key.transpose(2, 3)) * scale  # [B, Hkv, G, L]
    probs = torch.softmax(scores.float() + attention_mask, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # [B, Hkv, G, D]
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


@dataclass(frozen=True)
class SharedPrefix:
    """The prompts of a grouped batch, stored once per group (policy.static.shared_prefix): what every decode
    step attends besides each row's own cache. Rows are laid out group by group: row g * rows_per_group + r
    is row r of group g."""

    cache: Any
    """A StaticCache whose layers hold each group's prompt K/V [groups, Hkv, slots, D] (rotary applied)."""
    bias: torch.Tensor
    """[groups, 1, 1, P] float32: 0 for a group's prompt keys, MASKED elsewhere; its length P is how many
    prefix slots a step reads."""
    rows_per_group: int
    """Rows of one group in the batch (its dummy rows included)."""


_PREFIX: list[SharedPrefix] = []
"""The shared prefix the decode steps attend now (set by `shared_prefix`; empty: none)."""


@contextlib.contextmanager
def shared_prefix(prefix: SharedPrefix) -> Iterator[None]:
    """Inside, every decode step of `static_decode_attention` also attends `prefix` (see `SharedPrefix`)."""
    _PREFIX.append(prefix)
    try:
        yield
    finally:
        _PREFIX.pop()


def shared_prefix_key() -> tuple[int, tuple[int, ...]] | None:
    """What a captured decode graph baked in of the shared prefix (its bias's address and shape), None
    without one: a graph captured for one prefix must not replay for another."""
    if not _PREFIX:
        return None
    return _PREFIX[-1].bias.data_ptr(), tuple(_PREFIX[-1].bias.shape)


def _partial(q: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: torch.Tensor, scale: float):
    """One part of a softmax over keys split in parts: (max score m, sum of exp(score - m) s, the part's
    own softmax-weighted values o in float32), q [N, Hkv, Q, D] against key / value [N, Hkv, n, D]."""
    scores = torch.matmul(q, key.transpose(2, 3)) * scale  # the model dtype, as the whole-cache path
    scores = scores.float() + bias
    top = scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores - top)
    total = weights.sum(dim=-1, keepdim=True)
    out = torch.matmul((weights / total).to(value.dtype), value).float()
    return top, total, out


def merge_partial_attention(parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Softmax attention over the union of the parts' keys from each part's (m, s, o) (`_partial`): with
    M = max m_i, out = sum_i e^(m_i - M) s_i o_i / sum_i e^(m_i - M) s_i, exactly the softmax over all
    keys at once (up to float rounding). A part whose keys are all masked has m_i ~ MASKED, so its weight
    e^(m_i - M) is 0 as long as another part sees a key."""
    top = parts[0][0]
    for m, _, _ in parts[1:]:
        top = torch.maximum(top, m)
    num = den = None
    for m, s, o in parts:
        w = torch.exp(m - top) * s
        num = w * o if num is None else num + w * o
        den = w if den is None else den + w
    assert num is not None and den is not None
    return num / den


def _with_shared_prefix(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        bias: torch.Tensor, scaling: float | None, prefix: SharedPrefix) -> torch.Tensor:
    """`static_decode_attention` when the batch's prompts are `prefix`: each row's own keys (bias [B, 1, 1, n])
    and its group's prompt keys, two partial softmaxes merged exactly. The group's rows attend its prompt
    together: the prompt's K/V are read once per group, not once per row."""
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    per_head = heads // kv_heads
    scale = scaling if scaling is not None else dim ** -0.5
    rows = prefix.rows_per_group
    groups = batch // rows
    attended = bias.shape[-1]
    q = query.reshape(batch, kv_heads, per_head, dim)
    own = _partial(q, key[:, :, :attended], value[:, :, :attended], bias, scale)  # [B, Hkv, per_head, .]
    layer = prefix.cache.layers[module.layer_idx]
    slots = prefix.bias.shape[-1]
    # the group's rows' queries side by side: [G, Hkv, rows * per_head, D] against the group's prompt
    qg = q.reshape(groups, rows, kv_heads, per_head, dim).transpose(1, 2).reshape(groups, kv_heads, rows * per_head, dim)
    m, s, o = _partial(qg, layer.keys[:, :, :slots], layer.values[:, :, :slots], prefix.bias, scale)

    def per_row(t: torch.Tensor) -> torch.Tensor:  # [G, Hkv, rows * per_head, x] -> [B, Hkv, per_head, x]
        return t.reshape(groups, kv_heads, rows, per_head, -1).transpose(1, 2).reshape(batch, kv_heads, per_head, -1)

    out = merge_partial_attention([own, (per_row(m), per_row(s), per_row(o))]).to(value.dtype)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous()


def kv_read_bytes(cache: Any, rows: int, slots: int) -> int:
    """Bytes of K and V one decode step reads from `cache` (a StaticCache, its layers initialised) when
    `rows` rows attend `slots` slots each: every layer's keys and values [rows, Hkv, slots, D]."""
    total = 0
    for layer in cache.layers:
        for t in (layer.keys, layer.values):
            total += rows * t.shape[1] * slots * t.shape[3] * t.element_size()
    return total


_SDPA: list[Any] = []
"""transformers' sdpa attention function, the fallback (imported with transformers, on first use)."""


def register_static_attention() -> None:
    """Register STATIC_ATTENTION with transformers (once; transformers is imported here, not at import)."""
    if not _SDPA:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        _SDPA.append(sdpa_attention_forward)
        AttentionInterface.register(STATIC_ATTENTION, static_decode_attention)

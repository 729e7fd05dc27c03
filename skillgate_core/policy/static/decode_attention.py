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

from typing import Any

import torch

__all__ = ["MASKED", "STATIC_ATTENTION", "kv_read_bytes", "register_static_attention", "static_decode_attention"]

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

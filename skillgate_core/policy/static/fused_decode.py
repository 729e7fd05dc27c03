"""The static sampler's decode step with fused projections, for Llama-family models (Llama, Qwen2).

One token per row at batch 32 is bound by how many kernels run, not by the bytes they read: on an
H200 a decode step of the 360M Qwen2-shaped anchor model took 1.35 ms of GPU time in ~400 kernels of
1-6 us each, while reading every weight once takes ~0.15 ms (benchmarks/results/gpu/
grpo_step_vs_trl_c5e0553/README.md). Seven of a layer's kernels are projection GEMMs: q, k, v, o, gate,
up, down. Here q/k/v run as ONE GEMM against their weights stacked row-wise, and gate/up as one, so a
layer runs four projection GEMMs instead of seven; the rest of the layer is the model's own modules
(RMSNorm, rotary embedding, activation, o_proj, down_proj) in the model's order, and attention is
`decode_attention.static_decode_attention` against the sampler's StaticCache (written through the cache
layer's own `update`, which advances the slot counter `seek_cache` sets).

The stacked weights are copies: `refresh()` rewrites them from the model's current weights (an
in-place copy into buffers with fixed addresses, so captured CUDA graphs stay valid). The sampler
calls it before every decode, so however the replica's weights change between calls (the trainer's
in-place `refresh_replica`, a `load_state_dict`), the next tokens are drawn from them. The copy costs
one read and one write of those weights, ~0.3 ms for the 360M model on an H200, once per call, not
per token.

Only the decode step runs here; prefill stays the model's forward. `fusable(model)` says why a model
is not taken (another architecture, sliding-window layers, per-head q/k norms); then the sampler keeps
the model's forward.

The sampler's default on CUDA (compiled) for a model `fusable` takes, when the copies fit
FREE_MEMORY_SHARE of the GPU's free memory (`too_large`); measured on an H200 with the
anchor model: generation 0.708 s against 0.822 s a GRPO step (benchmarks/results/gpu/
grpo_step_fused_b505c6d/README.md). On the CPU the model's forward decodes unless asked
(`StaticSamplerConfig(fuse_projections=True)`).

    fused = FusedDecode.build(model)            # None if not fusable
    fused.refresh()                             # before each decode loop
    logits = fused.logits(ids, slot, offset, bias, cache)   # [B, V], what model(...) gives
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from skillgate_core.policy.static.decode_attention import static_decode_attention

__all__ = ["FREE_MEMORY_SHARE", "FusedDecode", "fusable", "projection_groups", "stacked_bytes", "too_large"]

SUPPORTED = ("llama", "qwen2")
"""model_type values whose decoder layer is RMSNorm -> q/k/v -> rotary -> attention -> o -> residual ->
RMSNorm -> down(act(gate) * up) -> residual, which `FusedDecode.logits` reproduces."""


def projection_groups(layer: Any) -> tuple[tuple[Any, Any, Any], tuple[Any, Any]]:
    """A decoder layer's projections that run as one GEMM each: (q, k, v) and (gate, up), stacked in this order."""
    attn, mlp = layer.self_attn, layer.mlp
    return (attn.q_proj, attn.k_proj, attn.v_proj), (mlp.gate_proj, mlp.up_proj)


def fusable(model: Any) -> str:
    """'' when `FusedDecode` can run this model's decode step, else why not (one line)."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED:
        return f"model_type {kind!r} is not one of {SUPPORTED}"
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not hasattr(model, "lm_head") or not hasattr(inner, "rotary_emb"):
        return "no model.layers / lm_head / rotary_emb"
    if any(t != "full_attention" for t in (getattr(config, "layer_types", None) or [])):
        return "sliding-window layers"
    for layer in layers:
        if any(hasattr(layer.self_attn, name) for name in ("q_norm", "k_norm")):
            return "per-head q/k norms"
        for group in projection_groups(layer):
            if len({p.bias is None for p in group}) != 1:
                return "a projection group mixes biased and unbiased layers"
    return ""


FREE_MEMORY_SHARE = 0.10
"""The sampler fuses by default only if the stacked copies take at most this share of the GPU's free memory."""


def stacked_bytes(model: Any) -> int:
    """Bytes of the stacked q/k/v and gate/up copies `FusedDecode` keeps beside the model's own weights
    (about two thirds of the decoder layers' weights: ~9 GB in bf16 for a 7B Llama)."""
    total = 0
    for layer in model.model.layers:
        for group in projection_groups(layer):
            for t in (x for proj in group for x in (proj.weight, proj.bias)):
                total += 0 if t is None else t.numel() * t.element_size()
    return total


def too_large(model: Any, free_bytes: int, share: float = FREE_MEMORY_SHARE) -> str:
    """'' when the stacked copies fit `share` of `free_bytes` (the GPU's free memory), else why not."""
    need = stacked_bytes(model)
    if need <= share * free_bytes:
        return ""
    return (f"the stacked q/k/v and gate/up copies ({need / 2**30:.2f} GiB) would take more than {share:.0%} "
            f"of the GPU's free memory ({free_bytes / 2**30:.2f} GiB)")


@dataclass
class _Layer:
    """One decoder layer's stacked weights and the sizes to split their outputs at."""

    qkv_weight: torch.Tensor
    qkv_bias: torch.Tensor | None
    gate_up_weight: torch.Tensor
    gate_up_bias: torch.Tensor | None
    qkv_split: tuple[int, int, int]
    inter: int


class FusedDecode:
    """The decode step of `model` with stacked q/k/v and gate/up weights (module docstring)."""

    def __init__(self, model: Any) -> None:
        why = fusable(model)
        if why:
            raise ValueError(f"fused decode: {why}")
        self.model = model
        self.layers: list[_Layer] = []
        with torch.no_grad():
            for layer in model.model.layers:
                qkv, gate_up = projection_groups(layer)
                self.layers.append(_Layer(
                    qkv_weight=torch.cat([p.weight for p in qkv]),
                    qkv_bias=torch.cat([p.bias for p in qkv]) if qkv[0].bias is not None else None,
                    gate_up_weight=torch.cat([p.weight for p in gate_up]),
                    gate_up_bias=torch.cat([p.bias for p in gate_up]) if gate_up[0].bias is not None else None,
                    qkv_split=(qkv[0].out_features, qkv[1].out_features, qkv[2].out_features),
                    inter=gate_up[0].out_features))

    @classmethod
    def build(cls, model: Any) -> FusedDecode | None:
        """A FusedDecode of `model`, or None when `fusable` says no."""
        return None if fusable(model) else cls(model)

    def buffers(self) -> list[torch.Tensor]:
        """The stacked weight tensors (their addresses never change: mark them static when compiling)."""
        out: list[torch.Tensor] = []
        for lay in self.layers:
            out += [t for t in (lay.qkv_weight, lay.qkv_bias, lay.gate_up_weight, lay.gate_up_bias) if t is not None]
        return out

    @torch.no_grad()
    def refresh(self) -> None:
        """Copy the model's current q/k/v and gate/up weights into the stacked buffers, in place."""
        for lay, layer in zip(self.layers, self.model.model.layers, strict=True):
            qkv, gate_up = projection_groups(layer)
            torch.cat([p.weight for p in qkv], out=lay.qkv_weight)
            torch.cat([p.weight for p in gate_up], out=lay.gate_up_weight)
            if lay.qkv_bias is not None:
                torch.cat([p.bias for p in qkv], out=lay.qkv_bias)
            if lay.gate_up_bias is not None:
                torch.cat([p.bias for p in gate_up], out=lay.gate_up_bias)

    def logits(self, ids: torch.Tensor, slot: torch.Tensor, offset: torch.Tensor, bias: torch.Tensor,
               cache: Any) -> torch.Tensor:
        """Logits [B, V] of one token per row, ids [B, 1] written at cache slot `slot` [1]; position ids
        slot - offset [B]; `bias` [B, 1, 1, L] the float key bias of `static_decode_attention`."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        inner = self.model.model
        hidden = inner.embed_tokens(ids)  # [B, 1, H]
        position_ids = (slot[None, :] - offset[:, None]).clamp_min(0)
        cos, sin = inner.rotary_emb(hidden, position_ids)
        batch = ids.shape[0]
        for lay, layer, cache_layer in zip(self.layers, inner.layers, cache.layers, strict=True):
            attn, mlp = layer.self_attn, layer.mlp
            head = attn.head_dim
            x = layer.input_layernorm(hidden)
            q, k, v = F.linear(x, lay.qkv_weight, lay.qkv_bias).split(lay.qkv_split, dim=-1)
            q = q.view(batch, 1, -1, head).transpose(1, 2)
            k = k.view(batch, 1, -1, head).transpose(1, 2)
            v = v.view(batch, 1, -1, head).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            keys, values = cache_layer.update(k, v)
            out, _ = static_decode_attention(attn, q, keys, values, bias, scaling=attn.scaling)
            hidden = hidden + attn.o_proj(out.reshape(batch, 1, -1))
            x = layer.post_attention_layernorm(hidden)
            gate, up = F.linear(x, lay.gate_up_weight, lay.gate_up_bias).split(lay.inter, dim=-1)
            hidden = hidden + mlp.down_proj(mlp.act_fn(gate) * up)
        return self.model.lm_head(inner.norm(hidden))[:, -1, :]

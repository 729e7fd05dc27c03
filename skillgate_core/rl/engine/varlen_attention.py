"""Packed-row attention without the flash-attn package: PyTorch's own varlen flash kernel.

A packed micro-batch (skillgate_core.rl.engine.packing) is one row of several samples. Under "sdpa" it
needs a dense [T, T] block mask, which costs T^2 memory and rules out the flash kernel, so the
trainer packs one sample per micro-batch there. flash-attn's varlen kernel avoids both, but the
package is not on every machine (not on the shared H200 image). `torch.nn.attention.varlen.varlen_attn`
(torch >= 2.9) is the same kind of kernel inside PyTorch: this module registers it with transformers
as the attention implementation TORCH_VARLEN, for TRAINING forwards of packed rows:

    register()                                   # idempotent; engine._load calls it when asked for
    AutoModelForCausalLM.from_pretrained(d, attn_implementation=TORCH_VARLEN)
    token_logprobs(model, micro_batch)            # cu_seqlens from packing.flash_attention_kwargs

Without cu_seqlens each batch row is one whole sequence. On CPU, in float32, or where torch has no
varlen_attn, the same function runs causal sdpa per sample (slow, exact: the CPU tests' reference).
A padding mask or a KV cache is refused (the replica samples with sdpa: engine.load_replica).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["TORCH_VARLEN", "register", "self_check", "torch_varlen_available", "varlen_attention_forward"]

TORCH_VARLEN = "torch_varlen"
"""The attention implementation name this module registers with transformers."""


def torch_varlen_available() -> bool:
    """True when this torch has the varlen flash kernel and a CUDA device to run it on."""
    if not torch.cuda.is_available():
        return False
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return False
    return True


def _kernel_kwargs(fn: Callable[..., object], scale: float | None) -> dict[str, Any]:
    # torch 2.9 took is_causal=; 2.10+ takes window_size=(-1, 0) for causal, and scale=
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {"is_causal": True} if "is_causal" in params else {"window_size": (-1, 0)}
    if "scale" in params and scale is not None:
        kwargs["scale"] = scale
    return kwargs


def _per_sample(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: list[int], scale: float | None) -> torch.Tensor:
    """Reference path: causal sdpa on each sample. q [T, Hq, D], k/v [T, Hk, D] -> [T, Hq, D]."""
    groups = q.shape[1] // k.shape[1]
    out = []
    for start, end in zip(cu[:-1], cu[1:], strict=True):
        qs, ks, vs = (x[start:end].transpose(0, 1) for x in (q, k, v))  # [H, t, D]
        if groups > 1:
            ks, vs = ks.repeat_interleave(groups, dim=0), vs.repeat_interleave(groups, dim=0)
        out.append(F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale).transpose(0, 1))
    return torch.cat(out, dim=0)


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    cu_seq_lens_k: torch.Tensor | None = None,
    max_length_q: int | None = None,
    max_length_k: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: query [B, Hq, T, D], key/value [B, Hk, T, D] -> [B, T, Hq, D]."""
    if attention_mask is not None:
        raise ValueError(f"{TORCH_VARLEN} takes packed rows without padding; got an attention mask (use sdpa)")
    if sliding_window is not None or dropout:
        raise NotImplementedError(f"{TORCH_VARLEN}: no sliding window, no attention dropout")
    batch, heads, t, dim = query.shape
    if key.shape[2] != t:
        raise ValueError(f"{TORCH_VARLEN} is for training forwards (no KV cache): {t} queries, {key.shape[2]} keys")
    q, k, v = (x.transpose(1, 2).reshape(batch * t, x.shape[1], dim) for x in (query, key, value))  # [B*T, H, D]
    if cu_seq_lens_q is None:
        cu_t = torch.arange(0, batch * t + 1, t, dtype=torch.int32, device=q.device)
        longest = t
    else:
        if batch != 1:
            raise ValueError(f"{TORCH_VARLEN}: cu_seqlens describe one packed row, got a batch of {batch}")
        cu_t = cu_seq_lens_q.to(device=q.device, dtype=torch.int32)
        longest = int(max_length_q) if max_length_q is not None else int((cu_t[1:] - cu_t[:-1]).max())
    fused = q.is_cuda and q.dtype in (torch.bfloat16, torch.float16) and torch_varlen_available()
    if fused:
        from torch.nn.attention.varlen import varlen_attn

        extra = _kernel_kwargs(varlen_attn, scaling)
        if k.shape[1] != q.shape[1]:
            if "enable_gqa" in inspect.signature(varlen_attn).parameters:
                extra["enable_gqa"] = True
            else:
                groups = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = varlen_attn(q, k, v, cu_t, cu_t, longest, longest, **extra)
        assert isinstance(out, torch.Tensor)  # a (out, aux) pair only with return_aux, which we never ask
    else:
        out = _per_sample(q, k, v, cu_t.tolist(), scaling)
    return out.reshape(batch, t, heads, dim), None


def self_check(device: str | torch.device = "cuda", dtype: torch.dtype = torch.bfloat16) -> str | None:
    """None when the kernel path runs here (forward against the per-sample reference, and backward);
    else why not. Cheap (one small packed row): call it before choosing TORCH_VARLEN on a new machine."""
    try:
        gen = torch.Generator(device="cpu").manual_seed(0)
        q, k, v = (torch.randn(1, h, 96, 64, generator=gen).to(device, dtype).requires_grad_() for h in (4, 2, 2))
        cu = torch.tensor([0, 30, 96], dtype=torch.int32, device=device)
        out, _ = varlen_attention_forward(torch.nn.Module(), q, k, v, None, scaling=0.125, cu_seq_lens_q=cu,
                                          cu_seq_lens_k=cu, max_length_q=66, max_length_k=66)
        fq, fk, fv = (x.detach().float().transpose(1, 2)[0] for x in (q, k, v))
        ref = _per_sample(fq, fk, fv, [0, 30, 96], 0.125)
        err = float((out[0].detach().float() - ref).norm() / ref.norm())
        if not err < 2e-2:
            return f"forward off by {err:.2e} (relative) against per-sample sdpa"
        out.float().square().sum().backward()
        if not all(x.grad is not None and bool(torch.isfinite(x.grad).all()) for x in (q, k, v)):
            return "backward gave no or non-finite gradients"
    except Exception as exc:  # the caller falls back to sdpa and records why
        return f"{type(exc).__name__}: {exc}"[:400]
    return None


_REGISTERED = False


def register() -> str:
    """Register TORCH_VARLEN with transformers (attention function + flash-style padding mask, which
    is None unless a row has padding); idempotent. Returns the name."""
    global _REGISTERED
    if not _REGISTERED:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

        AttentionInterface.register(TORCH_VARLEN, varlen_attention_forward)
        AttentionMaskInterface.register(TORCH_VARLEN, flash_attention_mask)
        _REGISTERED = True
    return TORCH_VARLEN

"""Float32 per-token log-probs of a packed micro-batch: the quantity the GRPO ratio is built from.

    logp = token_logprobs(engine_or_model, micro_batch, temperature=1.0)   # [R] float32, with grad
    per_sample = micro_batch.split(logp)                                    # or packing.unpack(...)

The model may be a DeepSpeed engine (ZeRO-3), a plain HF causal LM, or the inference replica. Only
the logits of positions that predict a response token are computed (`logits_to_keep` as an index
tensor), then: logits.float() / temperature -> log_softmax in float32 -> gather. The sampler
(skillgate_core.policy.local_sampler) computes its log-probs the same way, so at the first step
rho = exp(logp - logp_old) is 1 up to the sampler's own numerics; two forwards of the same model on
the same micro-batch give bit-identical values (rho exactly 1; tests/rl/test_logprobs.py).

Attention over the packed row follows the model's attention implementation:
- "flash_attention_2" / "flash_attention_3" / kernels flash, and "torch_varlen" (PyTorch's own
  varlen flash kernel, skillgate_core.rl.engine.varlen_attention): no mask, varlen via cu_seqlens;
- "sdpa": a block-diagonal causal bool mask; "eager": the same mask, additive in the model dtype.
Anything else (e.g. flex attention) is refused rather than silently attending across samples.
"""

from __future__ import annotations

from typing import Any

import torch

from skillgate_core.rl.engine.packing import MicroBatch, block_causal_mask, flash_attention_kwargs
from skillgate_core.rl.engine.varlen_attention import TORCH_VARLEN

__all__ = ["attention_inputs", "has_active_dropout", "model_device", "packs_varlen", "token_logprobs"]


def packs_varlen(model: Any) -> bool:
    """True when the model's attention kernel takes packed rows natively (flash varlen): then many
    samples share a micro-batch; otherwise one sample per micro-batch is cheaper."""
    return _is_varlen(str(getattr(_inner(model).config, "_attn_implementation", None) or ""))


def _is_varlen(impl: str) -> bool:
    return "flash" in impl or impl == TORCH_VARLEN


def _inner(model: Any) -> Any:
    # A DeepSpeed engine wraps the HF model as .module; HF models have no .module attribute.
    return getattr(model, "module", model)


def has_active_dropout(model: Any) -> bool:
    """Whether two forwards of `model` on the same batch can differ: a dropout layer with p > 0 in training
    mode, or an attention dropout in the config of a model in training mode (HF attention applies it
    functionally, with no module to find)."""
    inner = _inner(model)
    if not inner.training:
        return False
    if any(isinstance(m, torch.nn.Dropout) and m.p > 0 and m.training for m in inner.modules()):
        return True
    config = getattr(inner, "config", None)
    return any(float(getattr(config, key, 0.0) or 0.0) > 0 for key in ("attention_dropout", "hidden_dropout",
                                                                           "resid_pdrop", "attn_pdrop", "embd_pdrop"))


def model_device(model: Any) -> torch.device:
    """Where the model's activations live (a DeepSpeed engine's device, else its first parameter's)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device | str):
        return torch.device(device)
    return next(_inner(model).parameters()).device


def _model_dtype(model: Any) -> torch.dtype:
    inner = _inner(model)
    dtype = getattr(inner, "dtype", None)
    return dtype if isinstance(dtype, torch.dtype) else next(inner.parameters()).dtype


def attention_inputs(model: Any, micro_batch: MicroBatch) -> dict[str, Any]:
    """The forward kwargs that confine attention to each packed sample, for this model's kernel."""
    impl = str(getattr(_inner(model).config, "_attn_implementation", None) or "eager")
    if len(micro_batch.response_lengths) <= 1 and not _is_varlen(impl):
        # One sequence from position 0: the model's own causal mask is exact and takes the fast kernel.
        return {"attention_mask": None}
    if _is_varlen(impl):
        return {"attention_mask": None, **flash_attention_kwargs(micro_batch)}
    if impl == "sdpa":
        return {"attention_mask": block_causal_mask(micro_batch)}
    if impl == "eager":
        return {"attention_mask": block_causal_mask(micro_batch, _model_dtype(model))}
    raise ValueError(f"packed sequences are not supported with attention implementation {impl!r}")


def token_logprobs(model: Any, micro_batch: MicroBatch, temperature: float = 1.0) -> torch.Tensor:
    """log p(response token) under `model` at `temperature`, float32, packed layout [R].

    Runs under whatever grad mode the caller set (wrap in torch.no_grad() for old / reference
    log-probs). An empty micro-batch (no response token) still runs the forward, so ZeRO-3's
    parameter gathers stay in step across ranks, and returns an empty tensor attached to the graph.
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    device = model_device(model)
    mb = micro_batch.to(device)
    out = model(
        input_ids=mb.input_ids,
        position_ids=mb.position_ids,
        logits_to_keep=mb.target_positions,
        use_cache=False,
        **attention_inputs(model, mb),
    )
    logits = out.logits[0].float()  # [R, V]
    if temperature != 1.0:
        logits = logits / temperature
    # the sampler's formula exactly (log_softmax, then gather), so both sides round alike
    return torch.log_softmax(logits, dim=-1).gather(-1, mb.target_ids.unsqueeze(-1)).squeeze(-1)

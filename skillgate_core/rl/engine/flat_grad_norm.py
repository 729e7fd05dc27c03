"""The gradient norm and clipping of DeepSpeed's bf16 optimizer over each group's flat fp32 gradient.

Under ZeRO stage 1 in bf16 (the one-GPU default), DeepSpeed 0.19 wraps the optimizer in
`deepspeed.runtime.bf16_optimizer.BF16_Optimizer`. Its `step()` asks `get_grads_for_norm()` for the
gradients, and that returns one fp32 view per parameter: `get_global_norm_of_tensors` then launches a
norm kernel and a copy per parameter, and `clip_tensors_by_global_norm` one `mul_` per parameter:
hundreds of small launches per step (415M model on an H200: the optimizer step took 25.6 ms against
plain PyTorch's 5.1 ms). Those views all lie in one flat buffer per parameter group,
`fp32_groups_gradients_flat[i]`, whose other elements (parameters without a gradient this step, the
alignment padding) are zero: `clear_hp_grads` zeroes the whole buffer after every step. So the norm
and the clipping over the flat buffers are the same numbers, up to fp32 summation order, in a few
kernels. `install_flat_grad_norm` swaps the instance's `get_grads_for_norm` for one that returns them.

Only where that equality holds: no MoE layers (expert gradients are normed apart) and no
model-parallel unit (DeepSpeed then skips replicated parameters on all but one tensor-parallel rank),
fp32 gradient buffers, and a DeepSpeed whose `step()` calls `get_grads_for_norm` as 0.19 does.
Anything else is left as DeepSpeed built it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import weakref
from typing import Any

import torch

__all__ = ["install_flat_grad_norm"]

log = logging.getLogger(__name__)


@functools.cache
def _log_not_installed(why: str) -> None:
    log.info("flat gradient norm not installed, DeepSpeed's per-parameter norm stays: %s", why)


def _problem(optimizer: Any) -> str | None:
    """Why the flat norm cannot stand in for this BF16_Optimizer's (None: it can)."""
    if getattr(optimizer, "has_moe_layers", True):
        return "MoE layers (or no has_moe_layers attribute)"
    if not hasattr(optimizer, "mpu") or optimizer.mpu is not None:
        return "a model-parallel unit (or no mpu attribute)"
    flat = getattr(optimizer, "fp32_groups_gradients_flat", None)
    if not isinstance(flat, list) or not flat or not all(isinstance(t, torch.Tensor) for t in flat):
        return "no fp32_groups_gradients_flat list of tensors"
    if any(t.dtype != torch.float32 for t in flat):
        return f"gradient buffers of dtype {sorted({str(t.dtype) for t in flat})}, not float32"
    method = getattr(type(optimizer), "get_grads_for_norm", None)
    if method is None:
        return "no get_grads_for_norm method"
    params = list(inspect.signature(method).parameters)
    if params != ["self", "for_clipping"]:
        return f"get_grads_for_norm takes {params}, not (self, for_clipping)"
    try:
        step = inspect.getsource(type(optimizer).step)
    except (OSError, TypeError):
        return "the source of BF16_Optimizer.step is not readable"
    if "self.get_grads_for_norm()" not in step or "self.get_grads_for_norm(for_clipping=True)" not in step:
        return "BF16_Optimizer.step does not call get_grads_for_norm() and get_grads_for_norm(for_clipping=True)"
    return None


def install_flat_grad_norm(optimizer: Any) -> bool:
    """Make this BF16_Optimizer instance norm and clip its flat fp32 gradient buffers (an instance
    attribute `get_grads_for_norm`); returns whether it did. Any other optimizer is left untouched
    (False); so is a BF16_Optimizer it does not fit (why: logged at info, once per reason)."""
    from deepspeed.runtime.bf16_optimizer import BF16_Optimizer

    if not isinstance(optimizer, BF16_Optimizer):
        return False
    problem = _problem(optimizer)
    if problem is not None:
        _log_not_installed(problem)
        return False
    owner = weakref.ref(optimizer)  # no optimizer -> function -> optimizer cycle: freed by refcount as before

    def get_grads_for_norm(for_clipping: bool = False) -> Any:
        """BF16_Optimizer.get_grads_for_norm over the flat buffers: (non-expert, expert) for the norm,
        the list to clip with for_clipping."""
        opt = owner()
        assert opt is not None, "the optimizer this was installed on is gone"
        grads = list(opt.fp32_groups_gradients_flat)
        return grads if for_clipping else (grads, {})

    optimizer.get_grads_for_norm = get_grads_for_norm
    return True

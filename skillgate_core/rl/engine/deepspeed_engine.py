"""DeepSpeed ZeRO training engine, frozen reference, and the colocated inference replica.

Every function here runs inside a worker of `skillgate_core.rl.engine.launch` (a process group must exist:
gloo on CPU, NCCL on GPU, any world size) and is COLLECTIVE: every rank calls it, in the same order.

    zero = resolve_zero(model_dir, EngineConfig())                 # "auto": the stage for this model/world
    engine = build_engine(model_dir, EngineConfig(), zero=zero)    # policy, Adam per docs/method.md 6
    ref = build_reference(model_dir, EngineConfig(), beta=3e-5)    # None when beta == 0
    replica = load_replica(model_dir, EngineConfig())              # plain HF model, for rollouts
    ...
    for mb in micro_batches:                                       # same count on every rank
        logp = token_logprobs(engine, mb)
        backward(engine, selector_grpo_loss(logp, ..., normaliser=N_global, ...).loss)
    stats = optimizer_step(engine)                                 # one Adam step per rollout step
    refresh_replica(replica, engine)                               # gathered ZeRO-3 weights -> replica

Gradient arithmetic. The loss of docs/method.md 6 is divided by the GLOBAL normaliser N, so the step's
objective is the SUM over ranks and micro-batches of each micro-batch's loss. DeepSpeed averages
gradients over data-parallel ranks, so `backward` multiplies by the world size to undo that, and
gradient accumulation is unmanaged (`managed_gradient_accumulation: false`): any number of
micro-batches accumulates, `optimizer_step` is the boundary, nothing is scaled by an accumulation
count. Under bf16 the accumulation and the reduce-scatter run in float32.

The ZeRO stage: `EngineConfig.zero_stage` names one, or "auto" (the default) has `resolve_zero` pick
it from the parameter count, the world size and the free device memory (rl.engine.zero_choice: its rules),
once, when the engine is built; `build_engine` logs the choice, and the GRPO run records it in its
metrics (`zero_stage_resolved`, `zero_stage_reason`), not in any config digest.

ZeRO-3 loading avoids the known Ray Train + DeepSpeed pitfalls: an HfDeepSpeedConfig
is alive while from_pretrained runs, so each rank materialises only its shard; it is dropped right
after, so a later plain load (the replica) is not partitioned. The weight gather enters
GatheredParameters on every rank, bucket by bucket, bucketed by each parameter's FULL size
(ds_numel), not the size-0 ZeRO-3 placeholder.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from skillgate_core.rl.engine.lora_adapters import (
    LORA_TARGETS,
    is_lora,
    merged_parameters,
    plain_name,
    wrap_with_lora,
)
from skillgate_core.rl.engine.varlen_attention import TORCH_VARLEN
from skillgate_core.rl.engine.varlen_attention import register as register_torch_varlen
from skillgate_core.rl.engine.zero_choice import ZeroChoice, ZeroStage, choose_zero, explicit_zero, lora_zero

__all__ = [
    "EngineConfig",
    "StepStats",
    "backward",
    "build_engine",
    "build_reference",
    "compute_dtype",
    "deepspeed_config",
    "gathered_state_dict",
    "iter_gathered_parameters",
    "load_replica",
    "optimizer_step",
    "parameter_count",
    "refresh_replica",
    "resolve_zero",
]


@dataclass(frozen=True)
class EngineConfig:
    """How the policy is trained and sharded (defaults: docs/method.md 6 seed optimizer)."""

    lr: float = 1e-6
    """Adam learning rate, constant (no scheduler)."""
    weight_decay: float = 0.1
    """Decoupled (AdamW) weight decay, applied to every parameter."""
    betas: tuple[float, float] = (0.9, 0.98)
    """Adam (beta1, beta2)."""
    eps: float = 1e-8
    """Adam epsilon."""
    grad_clip: float = 1.0
    """Clip the global gradient L2 norm to this (0 = no clipping)."""
    dtype: Literal["auto", "bf16", "fp32"] = "auto"
    """Parameter / compute dtype; auto = bf16 on GPU, fp32 on CPU. Log-probs and loss are fp32 anyway."""
    optimizer: Literal["auto", "torch", "torch_fused", "deepspeed"] = "auto"
    """torch = torch.optim.AdamW on the shards (works everywhere, no compile); torch_fused = the same
    with fused=True (one kernel for the whole update); deepspeed = FusedAdam on GPU /
    DeepSpeedCPUAdam when offloaded (compiled on first use); auto = deepspeed when the optimizer is
    offloaded, else torch, fused when `zero_stage` is "auto" and the choice made on a GPU says so
    (rl.engine.zero_choice: `fused_adam`, with the measurement in its reason)."""
    zero_stage: ZeroStage = "auto"
    """ZeRO stage of the policy (3 shards parameters, gradients and optimizer state; 2 gradients and
    optimizer state; 1 optimizer state); auto = chosen when the engine is built from the model size, the
    world size and the free device memory (rl.engine.zero_choice; stage 3 on CPU)."""
    offload_optimizer: bool = False
    """Keep optimizer state in CPU memory (ZeRO-Offload)."""
    offload_params: bool = False
    """Keep parameter shards in CPU memory (ZeRO-Infinity, stage 3 only; auto then picks 3)."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward (non-reentrant) to save memory."""
    attn_implementation: str = "auto"
    """HF attention kernel of the policy; auto = on GPU flash_attention_2 when importable, else
    "torch_varlen" (PyTorch's varlen flash kernel, rl.engine.varlen_attention: packed rows without the flash-attn
    package) when its self-check passes there, else sdpa; sdpa on CPU. With sdpa every micro-batch holds
    one sample (2026-12-01, one H200, SmolLM2 GRPO: train 19-25 s of a 31-38 s step, 32 episodes one by
    one); a varlen kernel packs them. The replica samples with sdpa whenever the policy uses a varlen kernel."""
    reference_sharded: bool = True
    """Shard the frozen reference with ZeRO-3 (else a full copy on each rank)."""
    gather_bucket_mb: int = 512
    """Full-size MiB of parameters gathered at once when copying weights out of ZeRO-3."""
    zero_overrides: tuple[tuple[str, Any], ...] = ()
    """Extra DeepSpeed `zero_optimization` keys, (name, value) pairs applied last, e.g.
    (("stage3_param_persistence_threshold", 10**7), ("overlap_comm", False)): throughput tuning."""
    bf16_overrides: tuple[tuple[str, Any], ...] = ()
    """Extra DeepSpeed `bf16` section keys, (name, value) pairs applied last, e.g.
    (("immediate_grad_update", True),); ignored when the dtype is fp32 ("enabled" follows `dtype`)."""
    flat_grad_norm: bool = True
    """Under DeepSpeed's bf16 optimizer (ZeRO stage 1 in bf16: the one-GPU default), compute the gradient
    norm and clip over each group's flat fp32 gradient buffer (a few kernels) instead of DeepSpeed's
    per-parameter loop; the same norm up to fp32 summation order (rl.engine.flat_grad_norm)."""
    lora_rank: int = 0
    """0: train every weight. r > 0: train LoRA adapters of rank r on `lora_targets` only (rl.engine.lora_adapters):
    the base is frozen, the ZeRO stage is at most 2 (zero_choice.lora_zero), a checkpoint holds the adapters and
    their optimizer state, and every copy out of the engine (replica, servers, export) is the merged plain model."""
    lora_alpha: int = 0
    """LoRA scaling alpha (the update is B A * alpha / r); 0 = 2 x lora_rank."""
    lora_targets: tuple[str, ...] = LORA_TARGETS
    """Module names that get adapters when lora_rank > 0."""

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.eps <= 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("lr and eps must be > 0, weight_decay and grad_clip >= 0")
        if not all(0 <= b < 1 for b in self.betas) or len(self.betas) != 2:
            raise ValueError("betas must be two numbers in [0, 1)")
        if self.zero_stage != "auto" and (isinstance(self.zero_stage, bool) or self.zero_stage not in (0, 1, 2, 3)):
            raise ValueError(f"zero_stage must be 0..3 or 'auto', got {self.zero_stage!r}")
        if self.offload_params and self.zero_stage not in (3, "auto"):
            raise ValueError("offload_params needs zero_stage 3 (or auto, which then picks 3)")
        if self.gather_bucket_mb < 1:
            raise ValueError("gather_bucket_mb must be >= 1")
        if any(not isinstance(kv, tuple) or len(kv) != 2 or not isinstance(kv[0], str) for kv in self.zero_overrides):
            raise ValueError("zero_overrides must be (name, value) pairs")
        if any(not isinstance(kv, tuple) or len(kv) != 2 or not isinstance(kv[0], str) for kv in self.bf16_overrides):
            raise ValueError("bf16_overrides must be (name, value) pairs")
        if any(name == "enabled" for name, _ in self.bf16_overrides):
            raise ValueError('bf16_overrides may not set "enabled": set dtype instead')
        if self.lora_rank < 0 or self.lora_alpha < 0:
            raise ValueError(f"lora_rank and lora_alpha must be >= 0, got {self.lora_rank}, {self.lora_alpha}")
        if self.lora_rank and not self.lora_targets:
            raise ValueError("lora_targets: expected at least one module name when lora_rank > 0")


@dataclass(frozen=True)
class StepStats:
    """What one optimizer step reports."""

    grad_norm: float
    """Global gradient L2 norm before clipping (nan when DeepSpeed did not compute it)."""
    lr: float
    """Learning rate the step used."""


def _device_type() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_dtype(config: EngineConfig) -> torch.dtype:
    """The dtype parameters and activations use under `config` on this machine."""
    if config.dtype == "auto":
        return torch.bfloat16 if _device_type() == "cuda" else torch.float32
    return torch.bfloat16 if config.dtype == "bf16" else torch.float32


def _attn_implementation(config: EngineConfig) -> str:
    if config.attn_implementation != "auto":
        return config.attn_implementation
    if _device_type() == "cuda":
        from transformers.utils import is_flash_attn_2_available

        if is_flash_attn_2_available():
            return "flash_attention_2"
        return TORCH_VARLEN if varlen_usable() else "sdpa"
    return "sdpa"


@functools.cache
def varlen_usable() -> bool:
    """Whether the torch varlen kernel runs on this GPU (its self-check, once per process); why not is logged."""
    from skillgate_core.rl.engine.varlen_attention import self_check, torch_varlen_available

    problem = None if torch_varlen_available() else "no varlen kernel in this torch"
    problem = problem or self_check("cuda", torch.bfloat16)
    if problem:
        logging.getLogger(__name__).warning("training attention: sdpa, one sample per micro-batch (torch_varlen "
                                            "unusable here: %s)", problem)
    return problem is None


def _zero_section(config: EngineConfig, stage: int, *, with_optimizer: bool = True,
                  choice: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
    # overlap_comm: stages 2 and 3 only (2026-11-30 on the H200, stage 0 refused it: "overlap_comm only with ZeRO
    # stage 2", so the z0 preset of trainer_throughput.py never ran)
    zero: dict[str, Any] = {"stage": stage, "contiguous_gradients": True,
                            "overlap_comm": _device_type() == "cuda" and stage >= 2}
    if config.offload_optimizer and stage > 0 and with_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": _device_type() == "cuda"}
    if config.offload_params and stage == 3:
        zero["offload_param"] = {"device": "cpu", "pin_memory": _device_type() == "cuda"}
    return zero | dict(choice) | dict(config.zero_overrides)


def deepspeed_config(config: EngineConfig, *, inference: bool = False, zero: ZeroChoice | None = None) -> dict[str, Any]:
    """The DeepSpeed config dict of the policy engine (inference=True: the frozen reference, ZeRO-3,
    no optimizer). `zero`: the resolved stage and knobs (`resolve_zero`), needed when zero_stage is
    "auto"; the config's own zero_overrides apply after the choice's, its bf16_overrides (bf16 only) to
    the `bf16` section."""
    bf16 = compute_dtype(config) == torch.bfloat16
    ds: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": 1,  # one packed row per forward
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": bf16} | (dict(config.bf16_overrides) if bf16 else {}),
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
    if inference:
        ds["zero_optimization"] = _zero_section(config, 3, with_optimizer=False)
        return ds
    if zero is None:
        if config.zero_stage == "auto":
            raise ValueError('zero_stage "auto" is resolved on the ranks: pass zero=resolve_zero(model_dir, config)')
        zero = explicit_zero(int(config.zero_stage))
    if zero.stage == 0 and bf16:
        # DeepSpeed 0.19: "unsupported mix of model_dtype=torch.bfloat16 and grad_accum_dtype=torch.float32"
        raise ValueError("zero_stage 0 with bf16: DeepSpeed accumulates fp32 gradients for bf16 weights only "
                         "under ZeRO; use zero_stage 1 (on one rank it partitions nothing) or 'auto'")
    use_deepspeed_adam = config.optimizer == "deepspeed" or (config.optimizer == "auto" and config.offload_optimizer)
    ds |= {
        # the caller owns the accumulation boundary: optimizer_step() after any number of backward()
        "managed_gradient_accumulation": False,
        "gradient_clipping": config.grad_clip,
        "zero_optimization": _zero_section(config, zero.stage, choice=zero.overrides),
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": config.lr,
                "betas": list(config.betas),
                "eps": config.eps,
                "weight_decay": config.weight_decay,
                "torch_adam": not use_deepspeed_adam,
            },
        },
    }
    if config.optimizer == "torch_fused" or (config.optimizer == "auto" and not use_deepspeed_adam and zero.fused_adam):
        ds["optimizer"]["params"]["fused"] = True  # forwarded to torch.optim.AdamW
    if bf16:
        ds["data_types"] = {"grad_accum_dtype": "fp32"}
        ds["communication_data_type"] = "fp32"
    return ds


def _require_process_group() -> None:
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        raise RuntimeError(
            "no torch.distributed process group: run this inside skillgate_core.rl.engine.launch "
            "(launch_ray or run_in_process)"
        )


@contextlib.contextmanager
def _hf_deepspeed(ds: dict[str, Any] | None) -> Iterator[None]:
    """Within: transformers sees `ds` (ZeRO-3 -> from_pretrained loads into zero.Init shards) or,
    with None, no DeepSpeed config at all. The previous state is restored on exit."""
    from transformers.integrations import deepspeed as hf_deepspeed

    previous = hf_deepspeed._hf_deepspeed_config_weak_ref
    keep_alive = None
    if ds is None:
        hf_deepspeed.unset_hf_deepspeed_config()
    else:
        keep_alive = hf_deepspeed.HfDeepSpeedConfig(ds)  # registers itself (a weak reference)
    try:
        yield
    finally:
        del keep_alive
        hf_deepspeed._hf_deepspeed_config_weak_ref = previous


def _load(model_dir: str | Path, config: EngineConfig, ds: dict[str, Any] | None, *, attn: str | None = None):
    from transformers import AutoModelForCausalLM

    attn = attn or _attn_implementation(config)
    if attn == TORCH_VARLEN:
        register_torch_varlen()
    with _hf_deepspeed(ds):
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=compute_dtype(config), attn_implementation=attn)


def parameter_count(model_dir: str | Path) -> int:
    """Parameters of the HF causal LM in `model_dir` (tied weights once), counted on the meta device:
    nothing is loaded."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with _hf_deepspeed(None), torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    return sum(p.numel() for p in model.parameters())


def _free_device_bytes() -> int | None:
    """Free memory of this rank's accelerator now (None on CPU)."""
    if _device_type() != "cuda":
        return None
    return int(torch.cuda.mem_get_info(torch.cuda.current_device())[0])


def resolve_zero(model_dir: str | Path, config: EngineConfig) -> ZeroChoice:
    """The ZeRO stage and knobs the engine is built with: the config's stage, or with "auto"
    `zero_choice.choose_zero` on this model's parameter count, the world size and the smallest rank's
    free device memory. COLLECTIVE under "auto" (every rank gets the same answer). With LoRA
    (`lora_rank > 0`) at most stage 2 (`zero_choice.lora_zero`: an automatic 3 becomes 2, a named 3 is refused)."""
    choice = _resolve_zero(model_dir, config)
    return lora_zero(choice) if config.lora_rank else choice


def _resolve_zero(model_dir: str | Path, config: EngineConfig) -> ZeroChoice:
    if config.zero_stage != "auto":
        return explicit_zero(int(config.zero_stage))
    from skillgate_core.rl.engine import collectives

    _require_process_group()
    free = collectives.all_gather_objects(_free_device_bytes())
    device_bytes = None if any(f is None for f in free) else min(free)
    dtype: Literal["bf16", "fp32"] = "bf16" if compute_dtype(config) == torch.bfloat16 else "fp32"
    return choose_zero(parameter_count(model_dir), collectives.world_size(), device_bytes, dtype,
                       offload_optimizer=config.offload_optimizer, offload_params=config.offload_params)


def build_engine(model_dir: str | Path, config: EngineConfig, *, zero: ZeroChoice | None = None):
    """The trainable policy: a DeepSpeed engine around the HF causal LM in `model_dir`, with AdamW per
    `config`, at ZeRO stage `zero` (None: `resolve_zero(model_dir, config)` here; pass it to record the
    choice). Rank 0 logs the stage and why, and under DeepSpeed's bf16 optimizer whether the gradient norm
    runs over the flat buffers (`EngineConfig.flat_grad_norm`). Call `engine.train()` / `.eval()` as usual."""
    import deepspeed

    from skillgate_core.rl.engine.collectives import rank

    _require_process_group()
    if zero is None:
        zero = resolve_zero(model_dir, config)
    if rank() == 0:
        logging.getLogger(__name__).info("policy engine: ZeRO %s", zero.reason + (" (auto)" if zero.auto else ""))
    if config.lora_rank:
        zero = lora_zero(zero)  # a caller's own choice is held to the same rule as resolve_zero's
    ds = deepspeed_config(config, zero=zero)
    model = _load(model_dir, config, ds if zero.stage == 3 else None)
    model.config.use_cache = False
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if config.lora_rank:
        model = wrap_with_lora(model, rank=config.lora_rank, alpha=config.lora_alpha, targets=config.lora_targets)
    # only the trainable parameters reach the optimizer (with LoRA: the adapters)
    trainable = [p for p in model.parameters() if p.requires_grad]
    engine, *_ = deepspeed.initialize(model=model, model_parameters=trainable, config=ds)
    if config.flat_grad_norm:
        from deepspeed.runtime.bf16_optimizer import BF16_Optimizer

        from skillgate_core.rl.engine.flat_grad_norm import install_flat_grad_norm

        if isinstance(engine.optimizer, BF16_Optimizer):
            flat = install_flat_grad_norm(engine.optimizer)
            if rank() == 0:
                logging.getLogger(__name__).info(
                    "policy engine: gradient norm and clipping over %s", "the flat fp32 gradient buffers"
                    if flat else "each parameter (DeepSpeed's own loop; rl.engine.flat_grad_norm says why at info)")
    engine.train()
    return engine


def build_reference(model_dir: str | Path, config: EngineConfig, *, beta: float):
    """The frozen reference policy for the KL term, or None when beta == 0 (nothing is loaded).

    Sharded: a ZeRO-3 inference engine (no optimizer); else a full eval-mode copy on this rank's
    device. Use it under torch.no_grad() with `token_logprobs`, like the policy.
    """
    if beta < 0:
        raise ValueError("beta must be >= 0")
    if beta == 0:
        return None
    _require_process_group()
    if not config.reference_sharded:
        model = _load(model_dir, config, None).to(_this_device())
        model.requires_grad_(False)
        return model.eval()
    import deepspeed

    ds = deepspeed_config(config, inference=True)
    model = _load(model_dir, config, ds)
    model.requires_grad_(False)
    engine, *_ = deepspeed.initialize(model=model, config=ds)
    engine.eval()
    return engine


def _this_device() -> torch.device:
    if _device_type() == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def backward(engine, loss: torch.Tensor) -> None:
    """Accumulate d(loss)/d(params) for one micro-batch; `loss` is already divided by the global N.

    Multiplies by the data-parallel world size because DeepSpeed averages gradients over ranks,
    while the global-N loss wants their sum.
    """
    engine.backward(loss * engine.dp_world_size, scale_wrt_gas=False)


def optimizer_step(engine) -> StepStats:
    """Reduce the accumulated gradients, clip, and take one AdamW step (collective)."""
    engine.step()
    norm = engine.get_global_grad_norm()
    lr = engine.get_lr()[0]
    return StepStats(grad_norm=float("nan") if norm is None else float(norm), lr=float(lr))


def _inner(model: Any) -> torch.nn.Module:
    return getattr(model, "module", model)


def iter_gathered_parameters(
    engine, bucket_bytes: int | None = None
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Full (unsharded) parameters, one bucket of (name, tensor) at a time, on every rank.

    COLLECTIVE: every rank must exhaust the iterator (an early exit on one rank deadlocks the
    others in the next gather). The tensors are valid only until the next bucket is requested;
    copy what you keep. Buckets hold at most `bucket_bytes` of full-size parameters (one larger
    parameter goes alone). Works for ZeRO-3 engines, lower stages and plain modules (no gather). A LoRA
    policy yields the merged plain model's parameters (lora_adapters.merged_parameters; its stage <= 2
    keeps them whole, so nothing is gathered).
    """
    import deepspeed

    limit = bucket_bytes if bucket_bytes is not None else 512 * 2**20
    if is_lora(engine):
        yield from _merged_buckets(_inner(engine), limit)
        return
    bucket: list[tuple[str, torch.nn.Parameter]] = []
    size = 0
    for name, param in _inner(engine).named_parameters():
        nbytes = int(getattr(param, "ds_numel", param.numel())) * param.element_size()
        if bucket and size + nbytes > limit:
            with deepspeed.zero.GatheredParameters([p for _, p in bucket], modifier_rank=None):
                yield [(n, p.data) for n, p in bucket]
            bucket, size = [], 0
        bucket.append((name, param))
        size += nbytes
    if bucket:
        with deepspeed.zero.GatheredParameters([p for _, p in bucket], modifier_rank=None):
            yield [(n, p.data) for n, p in bucket]


def _merged_buckets(peft_model: Any, limit: int) -> Iterator[list[tuple[str, torch.Tensor]]]:
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in merged_parameters(peft_model):
        nbytes = tensor.numel() * tensor.element_size()
        if bucket and size + nbytes > limit:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += nbytes
    if bucket:
        yield bucket


def gathered_state_dict(
    engine,
    *,
    bucket_bytes: int | None = None,
    device: str | torch.device = "cpu",
    only_rank: int | None = None,
) -> dict[str, torch.Tensor]:
    """{parameter name: full tensor copy on `device`} (COLLECTIVE: every rank enters every gather).

    Names are `named_parameters()` names of the HF model, so a tied weight appears once (a tied
    lm_head.weight is absent: re-tie after load_state_dict(strict=False)); persistent buffers are
    added. only_rank=None: every rank keeps a full copy; only_rank=r: only rank r does (the others
    return {}), e.g. rank 0 writing an export without N full copies in host memory.
    """
    from skillgate_core.rl.engine.collectives import rank

    keep = only_rank is None or rank() == only_rank
    out: dict[str, torch.Tensor] = {}
    for bucket in iter_gathered_parameters(engine, bucket_bytes):
        if keep:
            for name, tensor in bucket:
                out[name] = tensor.detach().to(device, copy=True)
    if keep:
        for name, buf in _plain_buffers(engine):
            out.setdefault(name, buf.detach().to(device, copy=True))
    return out


def _plain_buffers(engine: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """The persistent buffers under the plain HF model's names (a LoRA policy's base model unwrapped)."""
    module: Any = _inner(engine)
    if is_lora(engine):
        return ((plain_name(n), b) for n, b in _persistent_buffers(module.get_base_model()))
    return _persistent_buffers(module)


def _persistent_buffers(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    # what state_dict() would hold besides parameters (ZeRO-3 leaves buffers unsharded)
    for prefix, mod in module.named_modules():
        for name, buf in mod.named_buffers(recurse=False):
            if buf is not None and name not in mod._non_persistent_buffers_set:
                yield (f"{prefix}.{name}" if prefix else name), buf


def load_replica(model_dir: str | Path, config: EngineConfig, *, device: str | torch.device | None = None):
    """The colocated inference replica: a plain (unsharded) HF model in eval mode with the engine's
    dtype and attention kernel on this rank's device; refresh it with `refresh_replica`."""
    attn = _attn_implementation(config)
    model = _load(model_dir, config, None, attn="sdpa" if attn == TORCH_VARLEN else attn).to(device or _this_device())
    model.requires_grad_(False)
    model.config.use_cache = True
    return model.eval()


def refresh_replica(replica: torch.nn.Module, engine, *, bucket_bytes: int | None = None) -> int:
    """Copy the engine's current (gathered) weights into `replica` in place; returns tensors copied.

    COLLECTIVE: every rank enters every gather, even if its replica would reject a tensor; name
    or shape mismatches are raised after the gather has finished on this rank.
    """
    if bucket_bytes is None:
        bucket_bytes = 512 * 2**20
    targets = dict(replica.named_parameters())
    copied: set[str] = set()
    unknown: list[str] = []
    wrong_shape: list[str] = []
    with torch.no_grad():
        for bucket in iter_gathered_parameters(engine, bucket_bytes):
            for name, full in bucket:
                target = targets.get(name)
                if target is None:
                    unknown.append(name)
                elif target.shape != full.shape:
                    wrong_shape.append(f"{name}: {tuple(full.shape)} -> {tuple(target.shape)}")
                else:
                    target.copy_(full)
                    copied.add(name)
        replica_buffers = dict(replica.named_buffers())
        for name, buf in _plain_buffers(engine):
            if name in replica_buffers and replica_buffers[name].shape == buf.shape:
                replica_buffers[name].copy_(buf)
    missing = sorted(set(targets) - copied)
    if unknown or wrong_shape or missing:
        raise ValueError(
            f"replica does not match the engine: unknown {unknown[:5]}, wrong shape {wrong_shape[:5]}, "
            f"not refreshed {missing[:5]}"
        )
    return len(copied)

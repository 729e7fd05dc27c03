"""Which DeepSpeed ZeRO stage the policy engine uses when its config says `zero_stage = "auto"`.

    choose_zero(params=415_242_112, world=1, device_bytes=139 * 10**9, dtype="bf16")
    -> ZeroChoice(stage=1, overrides=(), reason="stage 1: 415M params x 20 B = 8.3 GB of bf16 training state ...")

A pure function of four facts: the parameter count, the world size (data-parallel ranks), the free
device memory of the smallest rank (None on CPU) and the training dtype. `engine.resolve_zero` gathers
them once when the engine is built; the choice is logged and recorded in the run's metrics (GRPO:
`zero_stage_resolved`, `zero_stage_reason`), never in a config digest: "auto" is what is hashed, so one
config resolves by machine, and the metrics say what it resolved to.

Memory model, bytes of training state per parameter (`STATE_BYTES`), as the engine configures DeepSpeed:

    bf16   weights 2 (bf16) + gradients 6 (bf16 2, fp32 accumulation 4) + optimizer 12 (fp32 master 4,
           Adam moments 4 + 4) = 20 B
    fp32   weights 4 + gradients 4 + optimizer 8 (Adam moments; the weights are the master) = 16 B

Per rank, with `world` ranks: unsharded (stages 0 and 1 on one rank) weights + gradients + optimizer;
stage 2 weights + gradients + optimizer / world (gradients counted in full: conservative, ZeRO-2 keeps
only buckets of them); stage 3 everything / world. The state "fits" when it takes at most
`STATE_FRACTION` (half) of the rank's free device memory; the other half is for activations, the
colocated inference replica and the allocator (measured: the 415M trainer_throughput workload, 8.3 GB
of state, peaked at 39.5 GB under ZeRO-3 on one H200 at 16,384 tokens a micro-batch).

Rules, first match wins:

1. offload_params asked: stage 3 (the only stage that offloads parameters).
2. No device memory (CPU): stage 3, as before "auto" existed; CPU runs are the test bed of the sharded
   path the GPU machines take for large models.
3. One rank, the full state fits: nothing to shard, so stage 1, which on one rank partitions nothing
   (in bf16 it is DeepSpeed's bf16 optimizer). Not stage 0: DeepSpeed accumulates fp32 gradients for
   bf16 weights only under ZeRO (stage 0 with bf16 is refused), and at stage 0 it reports no gradient
   norm (the metrics' grad_norm would be nan); nor can stage 0 offload the optimizer.
4. One rank, it does not fit: stage 3 (offload only if asked: on one rank stage 3 shards nothing, so
   such a model needs offload_optimizer / offload_params, which are never chosen by default).
5. Several ranks, weights + gradients in full and the optimizer state sharded fit: stage 2 with
   500M-element reduce / all-gather buckets (the measured z2 preset: 1.78x on two H200s, ZeRO-3 1.56x).
6. Otherwise: stage 3 (the reason says when even that does not fit).

With the stage, on a GPU without offload, the choice sets `fused_adam`: a config whose optimizer is
"auto" then runs torch's fused AdamW (one kernel for the whole update). Measured on the 415M model at
stage 1 on one H200 (benchmarks/results/gpu/trainer_default_mfu_c752bf6/, three runs): the optimizer
step 7.8-7.9 ms against 13.2-13.3 ms with the per-tensor loop. A config that names its stage keeps the
per-tensor AdamW it was recorded with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from skillgate_core.base.config_ranges import Range

__all__ = [
    "FUSED_ADAM_WHY",
    "STAGE2_BUCKET",
    "STATE_BYTES",
    "STATE_FRACTION",
    "StateBytes",
    "ZeroChoice",
    "ZeroStage",
    "choose_zero",
    "LORA_STAGE3_REFUSED",
    "explicit_zero",
    "lora_zero",
    "resumed_zero",
]

ZeroStage = Literal["auto"] | Annotated[int, Range(ge=0, le=3)]
"""A config's ZeRO stage: "auto" (chosen by `choose_zero` when the engine is built) or 0..3."""

STATE_FRACTION = 0.5
"""Share of a rank's free device memory the training state may take (the rest: activations, the
replica, the allocator); see the module docstring for the measurement behind it."""

FUSED_ADAM_WHY = "optimizer step 7.8 against 13.2 ms, 415M model, stage 1, one H200, c752bf6"
"""Why an automatic choice on a GPU takes the fused AdamW: the measurement (benchmarks/results/gpu/
trainer_default_mfu_c752bf6/), quoted in the choice's reason."""

STAGE2_BUCKET = 5 * 10**8
"""Reduce / all-gather bucket (elements) of an automatic stage 2: the z2 preset's, as measured."""


@dataclass(frozen=True)
class StateBytes:
    """Bytes of training state per parameter, by part."""

    weights: int
    """The parameters the model computes with."""
    grads: int
    """Gradients, including an fp32 accumulation buffer when the weights are bf16."""
    optimizer: int
    """Adam's two moments, plus the fp32 master weights when the weights are bf16."""

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.optimizer


STATE_BYTES: dict[str, StateBytes] = {
    "bf16": StateBytes(weights=2, grads=2 + 4, optimizer=4 + 4 + 4),
    "fp32": StateBytes(weights=4, grads=4, optimizer=4 + 4),
}
"""Per training dtype (the engine's DeepSpeed config: bf16 weights accumulate fp32 gradients)."""


@dataclass(frozen=True)
class ZeroChoice:
    """The stage the engine is built with, its extra DeepSpeed knobs and why."""

    stage: int
    """ZeRO stage 0..3."""
    overrides: tuple[tuple[str, Any], ...]
    """`zero_optimization` keys the choice sets (the config's own zero_overrides are applied after them)."""
    reason: str
    """One line a person can check: the numbers behind the choice."""
    auto: bool
    """Whether the stage was chosen here (False: the config named it)."""
    fused_adam: bool = False
    """Whether a config whose optimizer is "auto" gets torch's fused AdamW (one kernel for the whole
    update) instead of its per-tensor loop: chosen with the stage on a GPU without optimizer offload."""


def explicit_zero(stage: int, why: str = "") -> ZeroChoice:
    """The choice of a config that names its stage (`why` says more, e.g. a resumed checkpoint's stage)."""
    if stage not in (0, 1, 2, 3) or isinstance(stage, bool):
        raise ValueError(f"zero_stage must be 0..3 or 'auto', got {stage!r}")
    return ZeroChoice(stage=stage, overrides=(), reason=f"stage {stage}: {why or 'set in the config'}", auto=False)


def resumed_zero(choice: ZeroChoice, written: object) -> ZeroChoice:
    """A resumed run's stage: under "auto" (choice.auto) the stage its checkpoint was `written` with,
    since DeepSpeed's checkpoint files differ by stage; `choice` itself when the config named a stage,
    when `written` is not a stage (unknown), or when both agree."""
    if not choice.auto or not isinstance(written, int) or isinstance(written, bool) or written == choice.stage:
        return choice
    if written not in (0, 1, 2, 3):
        return choice
    resumed = explicit_zero(written, f"the resumed checkpoint was written with it (auto would pick {choice.reason})")
    return replace(resumed, fused_adam=choice.fused_adam)


LORA_STAGE3_REFUSED = ("grpo.zero_stage = 3 with grpo.lora_rank > 0: LoRA trains at ZeRO stage <= 2 (the adapters "
                       "are merged into whole weights); set zero_stage to 0..2 or 'auto'")
"""The error of a LoRA run whose config names ZeRO stage 3 (GRPOConfig refuses it, and `lora_zero`)."""


def lora_zero(choice: ZeroChoice) -> ZeroChoice:
    """The stage for a LoRA policy (rl.engine.lora_adapters): at most 2. ZeRO-3 partitions each base weight
    and its adapters apart, and merging the adapters into the weights the replica gets needs the whole
    weight beside them; stages <= 2 keep every parameter whole (the adapters are few, so nothing needs
    sharding). An automatic stage 3 becomes 2, with the reason; a stage 3 the config names is refused."""
    if choice.stage < 3:
        return choice
    if not choice.auto:
        raise ValueError(LORA_STAGE3_REFUSED)
    return replace(choice, stage=2, overrides=(), reason=f"stage 2: LoRA adapters train at stage <= 2 (merged into "
                   f"whole weights for the replica), so auto's stage 3 is not taken (it said {choice.reason})")


def _count(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 10**9 else f"{n / 1e6:.0f}M" if n >= 10**6 else str(n)


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def choose_zero(
    params: int,
    world: int,
    device_bytes: int | None,
    dtype: Literal["bf16", "fp32"],
    *,
    offload_optimizer: bool = False,
    offload_params: bool = False,
) -> ZeroChoice:
    """The ZeRO stage and knobs for training `params` parameters on `world` ranks with `device_bytes` of
    free device memory each (the smallest rank's; None on CPU) in `dtype`. Rules: the module docstring."""
    if params < 1 or world < 1 or (device_bytes is not None and device_bytes < 1):
        raise ValueError(f"choose_zero needs params >= 1, world >= 1, device_bytes >= 1 or None; got "
                         f"params={params}, world={world}, device_bytes={device_bytes}")
    if dtype not in STATE_BYTES:
        raise ValueError(f"choose_zero: dtype must be one of {sorted(STATE_BYTES)}, got {dtype!r}")
    b = STATE_BYTES[dtype]
    state = f"{_count(params)} params x {b.total} B = {_gb(params * b.total)} of {dtype} training state"

    # on a GPU without optimizer offload, "auto" AdamW is torch's fused kernel (FUSED_ADAM_WHY)
    fused = device_bytes is not None and not offload_optimizer and not offload_params

    def chosen(stage: int, why: str, overrides: tuple[tuple[str, Any], ...] = ()) -> ZeroChoice:
        return ZeroChoice(stage=stage, overrides=overrides, auto=True, fused_adam=fused,
                          reason=f"stage {stage}: {why}" + (f"; AdamW fused ({FUSED_ADAM_WHY})" if fused else ""))

    if offload_params:
        return chosen(3, f"offload_params asked, and only stage 3 offloads parameters ({state})")
    if device_bytes is None:
        return chosen(3, f"no device memory to size against (CPU): the sharded path, as before 'auto' ({state})")
    budget = device_bytes * STATE_FRACTION
    room = f"{STATE_FRACTION:.0%} of the {_gb(device_bytes)} free per rank"
    full = params * b.total
    sharded3 = full / world
    not_even_3 = (f"; {_gb(sharded3)} a rank even at stage 3 exceeds that: set offload_optimizer / "
                  "offload_params (never chosen by default)") if sharded3 > budget else ""
    if world == 1:
        if full <= budget:
            return chosen(1, f"{state} fits {room}; one rank has nothing to shard, and stage 1 on one rank "
                             "partitions nothing (not 0: DeepSpeed refuses bf16 there and reports no gradient norm)")
        return chosen(3, f"{state} exceeds {room}; one rank shards nothing, so this needs offload_optimizer / "
                         "offload_params (never chosen by default)")
    stage2 = params * (b.weights + b.grads) + params * b.optimizer / world
    if stage2 <= budget:
        buckets = (("reduce_bucket_size", STAGE2_BUCKET), ("allgather_bucket_size", STAGE2_BUCKET))
        return chosen(2, f"{state}; full weights + gradients with the optimizer state sharded over {world} ranks "
                         f"= {_gb(stage2)} a rank fits {room}", buckets)
    return chosen(3, f"{state}; full weights + gradients with the optimizer state sharded over {world} ranks "
                     f"= {_gb(stage2)} a rank exceeds {room}, so parameters are sharded too{not_even_3}")

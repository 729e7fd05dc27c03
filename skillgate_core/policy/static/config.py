"""How a StaticSampler runs: one frozen config, every switch documented (how ids are computed, never
what is sampled: that is `SamplingConfig`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveInt, check_ranges

__all__ = ["StaticSamplerConfig"]


@dataclass(frozen=True)
class StaticSamplerConfig:
    """The switches of one StaticSampler (see policy.static.sampler's module docstring)."""

    compile: bool | None = None
    """Compile the decode step (torch.compile) and bucket the shapes; None = on CUDA only."""
    compile_options: Mapping[str, Any] | None = None
    """torch.compile keyword arguments (None = mode="reduce-overhead"). mode="max-autotune" also searches
    kernels for the decode GEMMs, the captured blocks then compiled with "max-autotune-no-cudagraphs":
    slower on an H200 at b505c6d. Tests pass backend="eager", fullgraph=True to prove the step traces
    without graph breaks."""
    length_bucket: PositiveInt = 256
    """Compiled: cache lengths are rounded up to a multiple of this (the turn cache rounds on CPU too)."""
    finish_check_every: PositiveInt = 8
    """The decode loop checks whether every row has stopped every this many steps (one host sync each)."""
    max_cached: PositiveInt = 4
    """(batch, length) caches kept at once; the least recently used is dropped."""
    stop_ids: Sequence[int] | None = None
    """The ids that end a completion (None = `local_sampler.stop_token_ids(tokenizer)`)."""
    min_batch: PositiveInt = 1
    """Compiled: every call is padded up to at least this batch, so the calls that fit share one shape
    and one compiled graph. Multi-turn rollouts otherwise meet a new (batch, length) bucket almost every
    turn (episodes finish, the contexts grow), each compiled anew: the first GRPO step of a 24.7M
    policy's agent rollouts took 131 s on an H200 that way. Dummy rows cost little on a small model."""
    min_cache_length: NonNegativeInt = 0
    """Compiled: every call's cache is at least this long (the same reason as min_batch)."""
    block_decode: bool | None = None
    """None = on when compiled on CUDA (each block of up to graph_steps tokens is one CUDA-graph replay);
    True elsewhere runs the same device-side loop without graphs (what the CPU tests compare with the
    per-step loop); False = the per-step loop."""
    graph_steps: PositiveInt = 8
    """Block decoding: decode steps per captured block at most."""
    fuse_projections: bool | None = None
    """The decode step with q/k/v and gate/up as one GEMM each (policy.static.fused_decode). None = fused
    when compiled on CUDA, `fusable(model)` gives no reason and the stacked copies take at most 10% of the
    GPU's free memory (`fused_decode.too_large`; measured on an H200: 14% less generation time,
    benchmarks/results/gpu/grpo_step_fused_b505c6d), else the model's forward (`fused_decode_why_not` in
    stats says why); True = fused (a model it cannot fuse is an error); False = the model's own forward."""

    live_slots: bool = True
    """Decode attention reads only the cache slots a step can see: the slots before the batch's newest one
    (every row writes in lock-step, so no row holds a key past it), rounded up to `live_bucket`; the slots
    past it are masked for every row, so leaving them out changes no probability (exp(MASKED) is 0 in
    float32). False = every step reads the whole cache (the path before: a 6,144-slot agent cache is
    read whole from the first token)."""
    live_bucket: PositiveInt = 512
    """Live slots: the attended length is rounded up to a multiple of this (at most the cache length). Each
    length is one CUDA graph per block size (compiled, the step is compiled once with the length dynamic);
    a coarser bucket means fewer graphs and at most this many masked slots read per step."""

    shared_prefix: bool = False
    """`StaticSampler.sample` only (opt-in, not yet measured on a GPU): the rows that share a prompt (a GRPO
    group) keep its K/V once, and each decode step reads a group's prompt once for all its rows, merged
    exactly with each row's own tokens (policy.static.shared_prefix). False = every row holds and reads its
    own copy. `sample_turns` (the turn cache) keeps a copy per row either way."""

    def __post_init__(self) -> None:
        check_ranges(self)

"""The static sampler: batched sampling for the colocated replica over a static KV cache.

- `sampler`: `StaticSampler` (one per replica: `sample`, `sample_turns`), `sample_batch`, `resolve_sampler`.
- `config`: `StaticSamplerConfig`, its switches, each documented.
- `decoder`: `StaticDecoder`, the prefill and decode both stand on (caches per shape bucket, the
  compiled step, CUDA-graph blocks, completions).
- `turn_cache`: its multi-turn KV reuse (each episode's cache row kept across turns).
- `fused_decode`: the decode step with q/k/v and gate/up as one GEMM each (Llama, Qwen2).
- `decode_attention`: the decode steps' attention (one query per row, K/V read once per KV head, only the
  live slots; with a shared prefix, two partial softmaxes merged exactly).
- `shared_prefix`: `sample` with a group's shared prompt kept once (opt-in: `shared_prefix`).

Every module here imports torch; the rest of the library imports this package where it samples.
"""

from skillgate_core.policy.static.config import StaticSamplerConfig
from skillgate_core.policy.static.sampler import StaticSampler, resolve_sampler, sample_batch

__all__ = ["StaticSampler", "StaticSamplerConfig", "resolve_sampler", "sample_batch"]

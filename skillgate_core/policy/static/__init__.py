"""The static sampler: batched sampling for the colocated replica over a static KV cache.

- `sampler`: `StaticSampler` (one per replica), `sample_batch`, `resolve_sampler`.
- `turn_cache`: its multi-turn KV reuse (each episode's cache row kept across turns).
- `fused_decode`: the decode step with q/k/v and gate/up as one GEMM each (Llama, Qwen2).
"""

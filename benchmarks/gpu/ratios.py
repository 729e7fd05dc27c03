"""Ours-vs-anchor speed ratios with one timing convention on both sides.

A run is its steps in order, the first one with its warm-up (compile, allocator, CUDA graphs). Two
figures come from it, each the same on both sides:

- steady: the steps after the first one (both sides after their warm-up);
- end to end: the first n steps, n the smaller step count of the two (both sides including it).

Until 2026-12-07 our figure was steady while TRL's was end to end, which overstated the ratio by
1.5-1.8x (docs/gpu.md, "How the ratios are timed"). Also: the bytes one decode step reads, from the
shapes, and the share of the card's memory bandwidth that reaching them in the measured time means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepTimes:
    """One side's steps, in the order they ran."""

    seconds: tuple[float, ...]
    """Wall time of each step, the first one with its warm-up."""
    tokens: tuple[float, ...]
    """Completion tokens each step sampled."""

    def __post_init__(self) -> None:
        if len(self.seconds) != len(self.tokens) or not self.seconds:
            raise ValueError(f"steps: {len(self.seconds)} times for {len(self.tokens)} token counts (need >= 1 each)")
        if any(s <= 0 for s in self.seconds):
            raise ValueError(f"steps: a step time is not positive: {self.seconds}")

    def rate(self, first: int, stop: int) -> dict[str, float]:
        secs, toks = self.seconds[first:stop], self.tokens[first:stop]
        return {"steps": len(secs), "s_per_step": round(sum(secs) / len(secs), 4),
                "completion_tok_per_s": round(sum(toks) / sum(secs), 1)}

    def steady(self) -> dict[str, float] | None:
        """After the first step; None with one step only."""
        return self.rate(1, len(self.seconds)) if len(self.seconds) > 1 else None

    def end_to_end(self, n: int) -> dict[str, float]:
        """The first n steps, warm-up included."""
        return self.rate(0, n)


def ours_steps(summary: Mapping[str, Any]) -> StepTimes:
    """Our GRPO step benchmark's records (gpu_bench.grpo_bench_worker): warm-up then timed steps; the
    profiled extra step is left out (the profiler slows it)."""
    rows = [r for r in summary.get("records", ()) if r.get("kind") != "profiled"]
    return StepTimes(tuple(float(r["wall_s"]) for r in rows), tuple(float(r["completion_tokens"]) for r in rows))


def anchor_steps(anchor: Mapping[str, Any]) -> StepTimes:
    """The TRL anchor's JSON (anchors/anchor_trl.py): its step clock and each step's tokens."""
    if "steps_s" not in anchor:
        raise ValueError("anchor JSON has no steps_s (a run of anchor_trl.py before its step clock): no symmetric ratio")
    secs = tuple(float(s) for s in anchor["steps_s"])
    return StepTimes(secs, tuple(float(t) for t in anchor["step_tokens"][: len(secs)]))


def symmetric_ratios(ours: StepTimes, anchor: StepTimes) -> dict[str, Any]:
    """Both conventions, each with both sides' figures and ours / anchor (tokens/s) and anchor / ours
    (s/step): > 1 means ours is faster."""
    def pair(a: Mapping[str, float] | None, b: Mapping[str, float] | None) -> dict[str, Any] | None:
        if a is None or b is None:
            return None
        return {"ours": dict(a), "anchor": dict(b),
                "completion_tok_per_s": round(a["completion_tok_per_s"] / b["completion_tok_per_s"], 2),
                "s_per_step": round(b["s_per_step"] / a["s_per_step"], 2)}

    n = min(len(ours.seconds), len(anchor.seconds))
    return {"steady": pair(ours.steady(), anchor.steady()),
            "end_to_end": pair(ours.end_to_end(n), anchor.end_to_end(n)) | {"n_steps": n}}


HBM_BYTES_PER_S = {"H100 SXM": 3.35e12, "H100 PCIe": 2.0e12, "H100 NVL": 3.9e12, "H200": 4.8e12, "A100": 2.0e12}
"""Datasheet memory bandwidth by card (bytes/s), matched against torch.cuda.get_device_name()."""


def hbm_bandwidth(device_name: str) -> float | None:
    """The datasheet bandwidth of a card by its name; None for one not in the table (no % then)."""
    name = device_name.upper()
    if "H100" in name:
        return HBM_BYTES_PER_S["H100 PCIe" if "PCIE" in name else "H100 NVL" if "NVL" in name else "H100 SXM"]
    return next((v for k, v in HBM_BYTES_PER_S.items() if k.upper() in name), None)


def decode_bytes_per_step(*, param_bytes: int, rows: int, cache_slots: int, layers: int, kv_heads: int,
                          head_dim: int, dtype_bytes: int) -> dict[str, int]:
    """What one decode token-step reads at least when every row attends over cache_slots slots: the
    weights once, and each row's keys and values over its slots in every layer."""
    kv = rows * cache_slots * layers * 2 * kv_heads * head_dim * dtype_bytes
    return {"weights": param_bytes, "kv_cache": kv, "total": param_bytes + kv}


def roofline_share(bytes_per_step: int, step_s: float, bandwidth: float | None) -> float | None:
    """The share of the card's bandwidth that reading bytes_per_step in step_s means (1.0 = the roofline)."""
    if bandwidth is None or step_s <= 0:
        return None
    return round(bytes_per_step / step_s / bandwidth, 4)

"""Plain PyTorch's training step (anchors/anchor_ds.py --mode torch), phase by phase.

    python benchmarks/gpu/anchor_ds_phases.py [anchor_ds.py's shape flags] [--phase-steps 6] [--profile-out F]

anchors/anchor_ds.py is the recorded anchor, kept byte for byte (tests/benchmarks/test_gpu_benchmarks.py checks its
hash), so it cannot time its own phases. This script repeats its torch mode step for step: the same
Qwen2Config (`gpu_bench.ds_model_config`, sdpa), `.to(device, bf16)` (fp32 on CPU), fused AdamW at
lr 1e-5 (fused on CUDA only), one random [mb, seq] batch, 2 warm-up steps, then `--steps` steps timed
as the anchor times them (no syncs in between): tok_per_s and mfu_vs_790T, to check this copy runs
at the anchor's speed. Then `--phase-steps` more steps through `gpu_bench.phase_medians`:
forward (`m(input_ids=x, labels=x).loss`), backward (`loss.backward()`), optimizer_step
(`opt.step(); opt.zero_grad(set_to_none=True)`), each synchronised; and with --profile-out, one
profiled step (its table written there, the top kernels/operators in the JSON). Prints one JSON line
last, as the anchor does (trainer_throughput.py --anchor-phases runs it as a subprocess).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402  (this folder)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_bench.add_model_args(p)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--mb", type=int, default=8)
    p.add_argument("--steps", type=int, default=6, help="steps timed as anchor_ds.py times them")
    p.add_argument("--phase-steps", type=int, default=6, help="then this many phase-timed steps")
    p.add_argument("--profile-out", default="", help="also profile one step; the profiler's table goes here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    sys.path.insert(0, str(gpu_bench.ROOT))  # skillgate_core (phase_medians' StepTimer)
    from transformers import Qwen2ForCausalLM

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    cfg = gpu_bench.ds_model_config(a)
    cfg._attn_implementation = "sdpa"
    m = Qwen2ForCausalLM(cfg).to(dev, torch.bfloat16 if cuda else torch.float32)
    n = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, fused=cuda)
    x = torch.randint(0, a.vocab, (a.mb, a.seq), device=dev)

    def step(phase: gpu_bench.Phase = gpu_bench.no_phase) -> None:
        with phase("forward"):
            loss = m(input_ids=x, labels=x).loss
        with phase("backward"):
            loss.backward()
        with phase("optimizer_step"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    gpu_bench.sync()
    t0 = time.time()
    for _ in range(a.steps):
        step()
    gpu_bench.sync()
    dt = time.time() - t0
    tps = a.mb * a.seq * a.steps / dt
    flops_per_token = 6 * n + 12 * a.layers * a.hidden * a.seq
    res: dict = {"nparams": n, "tok_per_s": round(tps), "s_per_step": round(dt / a.steps, 4),
                 "mfu_vs_790T": round(tps * flops_per_token / gpu_bench.PEAK_FLOPS, 3),
                 **gpu_bench.phase_medians(step, a.phase_steps)}
    if a.profile_out:
        try:
            res["profile_top"], table = gpu_bench.profiled_step(step)
            Path(a.profile_out).write_text(table)
        except Exception as exc:  # the timed numbers stand without it
            res["profile_error"] = f"{type(exc).__name__}: {exc}"[:800]
    res["peak_mem_GB"] = round(torch.cuda.max_memory_allocated() / 1e9, 1) if cuda else None
    print(json.dumps(res), flush=True)
    return res


if __name__ == "__main__":
    main()

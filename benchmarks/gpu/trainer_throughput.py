"""Training throughput of our engine vs plain PyTorch, in one run: tokens/s and MFU.

    python benchmarks/gpu/trainer_throughput.py                    # 1 H200 (docs/gpu.md)
    python benchmarks/gpu/trainer_throughput.py --num-gpus 2       # 2 GPUs: Ray Train with 2 workers
    python benchmarks/gpu/trainer_throughput.py --smoke            # CPU, tiny, < 1 min
    python benchmarks/gpu/trainer_throughput.py --variants default,default_fused,z2 --launchers process \
        --anchor-phases --profile                                  # where the default's time goes (below)

Workload: anchors/anchor_ds.py's model (the recorded anchor script, unchanged:
Qwen2-shaped, 415M at the defaults, random init), seq 2048, micro-batch 8: each rank trains on 8
samples of 2048 tokens per optimizer step (--prompt-len prompt + response, every response token in
the loss, synthetic advantages and selector weights) through OUR path: packing.pack_samples ->
logprobs.token_logprobs -> loss.selector_grpo_loss -> engine.backward -> engine.optimizer_step.
With a varlen attention kernel (torch_varlen: PyTorch's own flash varlen; or flash_attention_2) the 8
samples are ONE packed row of 16384 tokens; with sdpa, one micro-batch per sample.

  plain PyTorch   anchors/anchor_ds.py --mode torch (subprocess): bf16, fused AdamW, batch [8, 2048];
                  with --anchor-phases also anchor_ds_phases.py, the same step phase by phase (below)
  process         our engine, 1 GPU, run_in_process, each --variants preset (below)
  ray             our engine through Ray Train (launch_ray) with --num-gpus workers, the default preset
                  and the best process preset: scaling = ray tokens/s / process tokens/s of that preset

Presets (EngineConfig; all bf16, --attn attention, no gradient checkpointing):
  default     what a user gets: EngineConfig's defaults, zero_stage "auto" (rl.engine.zero_choice picks the
              stage from the model size, the world size and the free GPU memory; the JSON records
              which and why: zero_stage_resolved, zero_stage_reason) and optimizer "auto" (on a GPU
              torch's fused AdamW since the run at c752bf6, where it was measured as default_fused)
  default_fused  optimizer "torch_fused": the default on a GPU since c752bf6, measured there. On one GPU "auto" picks
              stage 1, where DeepSpeed (bf16 weights, fp32 gradient accumulation) wraps the optimizer in
              its BF16_Optimizer: fp32 master weights and gradients in ONE flat tensor (415M elements,
              1.7 GB). "auto" steps it with torch.optim.AdamW's foreach path, ~9 passes over it with
              full-size temporaries (sqrt, div, add); fused=True is one kernel reading and writing each
              tensor once, as plain PyTorch's anchor does
  default_dsnorm  the default before c752bf6: per-tensor AdamW (optimizer "torch") and flat_grad_norm
              off, so DeepSpeed's BF16_Optimizer computes the gradient norm and clips parameter by
              parameter (a norm kernel and a copy each, a host sync, a mul_ each; rl.engine.flat_grad_norm: a
              few kernels over the flat buffer)
  default_igu optimizer "torch" with bf16.immediate_grad_update (bf16_overrides): BF16_Optimizer adds each
              parameter's gradient into the fp32 buffer in a backward hook instead of all of them after
              backward
  default_fused_igu  default_igu with optimizer "torch_fused"
  z3          ZeRO-3, torch AdamW: the trainer's defaults before zero_stage "auto"
  z3_persist  ZeRO-3, every parameter persistent (no per-layer gathers on one GPU), bigger
              prefetch / reduce buckets, fused AdamW
  z2          ZeRO-2, fused AdamW, 500M-element buckets
  z1          ZeRO-1, fused AdamW: DeepSpeed's bf16 optimizer, on one GPU no partitioning
  z0          no ZeRO (fp32 only: DeepSpeed refuses bf16 weights with fp32 gradient accumulation there)
  z3_sdpa     z3 with sdpa attention (one sample per micro-batch): what the varlen kernel buys
  z3_ckpt     z3 with gradient checkpointing (memory for speed)
  z2_nooverlap z2 with overlap_comm off

Candidates for the default's gap to plain PyTorch, run beside `default` in one run (the command in
docs/gpu.md, Trainer throughput): default_fused (above) and z2 (the other DeepSpeed wrapper: the
ZeRO optimizer copies gradients into a contiguous buffer during backward and steps them fused; "what
if auto picked stage 2 on one GPU"). z1 is default_fused on one GPU. No zero_overrides preset for stage
1: with bf16 weights and fp32 accumulation DeepSpeed 0.19 uses BF16_Optimizer there, which reads only
allgather_bucket_size (one bucket already: 415M < 5e8; and it gathers nothing on one rank);
reduce_bucket_size / contiguous_gradients configure the ZeRO optimizer it replaces, and overlap_comm
is refused below stage 2 without managed gradient accumulation. BF16_Optimizer's own knobs are set
through EngineConfig.bf16_overrides (bf16.immediate_grad_update: default_igu) and
EngineConfig.flat_grad_norm (default_dsnorm turns it off); the fp32 gradient accumulation is no
EngineConfig field.

Where the time goes: after its timed steps, each process preset runs --phase-steps more with
forward (token_logprobs + loss), backward and optimizer_step (engine.optimizer_step) each bracketed by
torch.cuda.synchronize (gpu_bench.phase_medians; on CPU wall time): phases_s = their medians,
phased_step_s = the whole step's. Separate steps, so tok/s stays comparable with earlier runs (the
syncs cost the overlap between phases). --anchor-phases does the same for plain PyTorch:
anchor_ds_phases.py repeats anchor_ds.py's torch step (the anchor itself is kept byte for byte) and
reports its own tok/s beside the phases. --profile: one more step of each under torch.profiler, top
kernels and operators in the JSON (profile_top), the profiler's tables in the out folder
(trainer_profile_<preset>.txt, anchor_profile.txt). summary.phases lists the phases of plain torch
and each preset, summary.phase_gap_vs_plain_torch_s each preset's excess per phase.

MFU = tokens/s per GPU x (6 N + 12 L d s) / 790e12 (docs/gpu.md, Anchors); summary.default holds the
default preset's MFU beside the plain PyTorch one and the one-GPU target (TARGET_MFU). JSON: --out, else
$OUT, else benchmarks/results/gpu/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402  (this folder: Ray workers import it by name too)

SMOKE = {"hidden": 64, "layers": 2, "heads": 4, "kv": 2, "inter": 128, "vocab": 512, "seq": 128, "mb": 2,
         "steps": 2, "warmup": 1, "prompt_len": 16, "variants": "default,default_fused,z3,z2", "budget_s": 0.0,
         "phase_steps": 2, "anchor_phases": True}

PRESETS = gpu_bench.ENGINE_PRESETS
TARGET_MFU = 0.35
"""The project's target for the default trainer on one GPU (docs/gpu.md, Anchors)."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # anchor_ds.py's arguments and defaults
    gpu_bench.add_model_args(p)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--mb", type=int, default=8)
    p.add_argument("--steps", type=int, default=6, help="timed optimizer steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (anchor_ds.py: 2)")
    # ours
    p.add_argument("--prompt-len", type=int, default=64, help="prompt tokens of each 2048-token sample (no loss)")
    p.add_argument("--variants", default="default,z3,z3_persist,z2,z1",
                   help=f"process presets, of {','.join(PRESETS)}")
    p.add_argument("--attn", default="best", help="best = torch_varlen when it passes its self-check here, "
                   "else auto; or auto / sdpa / torch_varlen / flash_attention_2")
    p.add_argument("--num-gpus", type=int, default=0, help="Ray Train workers (default: every visible GPU, 1 on CPU)")
    p.add_argument("--launchers", default="process,ray", help="process, ray, or both")
    p.add_argument("--ray-variants", default="default,best",
                   help="presets run under Ray (best = the fastest process one)")
    p.add_argument("--anchor-mode", default="torch", choices=["torch", "ds", "both", "none"],
                   help="anchor_ds.py --mode to run beside ours (none = skip)")
    p.add_argument("--anchor-timeout", type=float, default=180.0)
    p.add_argument("--anchor-phases", action="store_true",
                   help="also time plain torch's step phase by phase (anchor_ds_phases.py, subprocess)")
    p.add_argument("--phase-steps", type=int, default=6,
                   help="process presets: phase-timed steps after the timed ones (0 = none)")
    p.add_argument("--profile", action="store_true",
                   help="process presets (and --anchor-phases): one more step under torch.profiler")
    p.add_argument("--budget-s", type=float, default=150.0, help="per launcher: presets left after this are skipped")
    p.add_argument("--smoke", action="store_true",
                   help="CPU smoke: tiny model, 2 steps, default + default_fused + z3 + z2, phases, Ray 1 worker")
    p.add_argument("--out", default=None, help="output folder (default $OUT, else benchmarks/results/gpu)")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):
        p.set_defaults(**SMOKE)  # smoke values are defaults: flags given beside --smoke still win
    a = p.parse_args(argv)
    unknown = [v for v in a.variants.split(",") + a.ray_variants.split(",") if v not in PRESETS and v != "best"]
    if unknown:
        p.error(f"unknown presets {unknown}; known: {sorted(PRESETS)}")
    if a.num_gpus <= 0:
        a.num_gpus = max(1, torch.cuda.device_count())
    return a


def engine_configs(names: list[str], attn: str, cuda: bool) -> tuple[tuple[str, object], ...]:
    from skillgate_core.rl.engine.deepspeed_engine import EngineConfig

    base = EngineConfig(lr=1e-5, dtype="bf16" if cuda else "fp32", attn_implementation=attn)
    return tuple((n, replace(base, **PRESETS[n])) for n in names)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    out, work, path, result = gpu_bench.start_run("trainer_throughput", a, argv)
    cuda = torch.cuda.is_available()
    t_all = time.perf_counter()

    # plain PyTorch (and, if asked, anchor_ds.py's own DeepSpeed ZeRO-3) on the same shapes
    if a.anchor_mode != "none":
        args = [*gpu_bench.model_args(a), "--seq", a.seq, "--mb", a.mb, "--steps", a.steps, "--mode", a.anchor_mode]
        print("anchor: anchors/anchor_ds.py", flush=True)
        result["anchor_ds"] = gpu_bench.run_anchor("anchor_ds.py", args, timeout=a.anchor_timeout)
        print("anchor_ds", json.dumps(result["anchor_ds"])[:600], flush=True)
        gpu_bench.write_json(path, result)
    if a.anchor_phases:
        args = [*gpu_bench.model_args(a), "--seq", a.seq, "--mb", a.mb, "--steps", a.steps,
                "--phase-steps", max(1, a.phase_steps), *(["--profile-out", out / "anchor_profile.txt"] if a.profile else [])]
        print("anchor phases: anchor_ds_phases.py", flush=True)
        result["anchor_phases"] = gpu_bench.run_anchor("anchor_ds_phases.py", args, timeout=a.anchor_timeout,
                                                       folder=gpu_bench.HERE)
        print("anchor_phases", json.dumps({k: v for k, v in result["anchor_phases"].items() if k != "profile_top"}),
              flush=True)
        gpu_bench.write_json(path, result)

    from skillgate_core.rl.engine.launch import LaunchConfig, launch_ray, run_in_process

    attn, why_not = gpu_bench.pick_attn(a.attn)
    result["attn"] = {"requested": a.attn, "used": attn, "torch_varlen_not_used_because": why_not}
    n_params = gpu_bench.save_random_model(gpu_bench.ds_model_config(a), work / "model",
                                           dtype=torch.bfloat16 if cuda else torch.float32)
    flops_per_token = 6 * n_params + 12 * a.layers * a.hidden * a.seq
    result["model"] = {"params": n_params, "flops_per_token": flops_per_token}
    names = a.variants.split(",")
    job = gpu_bench.ThroughputJob(model_dir=str(work / "model"), variants=engine_configs(names, attn, cuda),
                                  seq=a.seq, mb=a.mb, steps=a.steps, warmup=a.warmup, prompt_len=a.prompt_len,
                                  flops_per_token=flops_per_token, timeout_s=a.budget_s, phase_steps=a.phase_steps,
                                  profile_dir=str(out) if a.profile else "")
    launchers = a.launchers.split(",")
    if "process" in launchers:
        print(f"process: {names} (attn {attn})", flush=True)
        try:
            result["process"] = run_in_process(gpu_bench.throughput_worker, job, run_dir=work / "process",
                                               use_gpu=cuda).results[0]
        except Exception as exc:
            result["process"] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        gpu_bench.write_json(path, result)
    done = {k: v for k, v in result.get("process", {}).items() if isinstance(v, dict) and "tok_per_s" in v}
    best = max(done, key=lambda k: done[k]["tok_per_s"]) if done else None
    if "ray" in launchers:
        ray_names = list(dict.fromkeys(best if n == "best" else n for n in a.ray_variants.split(",")
                                       if n != "best" or best))
        key = f"ray_{a.num_gpus}"
        print(f"{key}: {ray_names}", flush=True)
        launch = LaunchConfig(num_workers=a.num_gpus, use_gpu=cuda, pythonpath=(str(Path(__file__).resolve().parent),),
                              storage_path=str(work / "ray"), name_prefix="throughput",
                              env=(("PYTHONWARNINGS", "ignore::FutureWarning"),))
        try:
            ray_job = replace(job, variants=engine_configs(ray_names, attn, cuda), phase_steps=0, profile_dir="")
            result[key] = launch_ray(gpu_bench.throughput_worker, ray_job, launch).results[0]
        except Exception as exc:
            result[key] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        gpu_bench.write_json(path, result)

    result["summary"] = summarise(result, a.num_gpus, best)
    result["wall_s"] = round(time.perf_counter() - t_all, 1)
    gpu_bench.write_json(path, result)
    print("SUMMARY trainer_throughput", json.dumps({**result["summary"], "json": str(path)}), flush=True)
    return result


def summarise(result: dict, num_gpus: int, best: str | None) -> dict:
    """The numbers the docs table wants: plain torch, each of ours (with the ZeRO stage it ran), MFU,
    ratio to torch, scaling; `default`: the default preset's rows, the stage it resolved to and why,
    whether one GPU meets TARGET_MFU, and its excess over plain torch per phase (`phase_table`)."""
    torch_tps = result.get("anchor_ds", {}).get("torch", {}).get("tok_per_s")
    rows = {}
    for launcher in ("process", f"ray_{num_gpus}"):
        for name, r in (result.get(launcher) or {}).items():
            if isinstance(r, dict) and "tok_per_s" in r:
                rows[f"{launcher}/{name}"] = {
                    "tok_per_s": r["tok_per_s"], "mfu": r["mfu_vs_790T"], "zero_stage": r.get("zero_stage_resolved"),
                    "vs_plain_torch": round(r["tok_per_s_per_gpu"] / torch_tps, 3) if torch_tps else None}
            elif isinstance(r, dict):
                rows[f"{launcher}/{name}"] = {k: v for k, v in r.items() if k in ("error", "skipped")}
    default: dict = {"target_mfu_one_gpu": TARGET_MFU}
    for launcher in ("process", f"ray_{num_gpus}"):
        r = (result.get(launcher) or {}).get("default")
        if isinstance(r, dict):
            default[launcher] = rows[f"{launcher}/default"] | {
                k: r[k] for k in ("zero_stage_resolved", "zero_stage_reason") if k in r}
    if "mfu" in default.get("process", {}):
        default["meets_target_one_gpu"] = default["process"]["mfu"] >= TARGET_MFU
    phases, gaps = phase_table(result)
    if "process/default" in gaps:
        default["gap_vs_plain_torch_s"] = gaps["process/default"]
    scaling = {}
    for name, r in (result.get(f"ray_{num_gpus}") or {}).items():
        one = (result.get("process") or {}).get(name, {})
        if isinstance(r, dict) and "tok_per_s" in r and "tok_per_s" in one:
            scaling[name] = round(r["tok_per_s"] / one["tok_per_s"], 3)
    return {"plain_torch_tok_per_s": torch_tps, "plain_torch_mfu": result.get("anchor_ds", {}).get("torch", {}).get(
        "mfu_vs_790T"), "best_process_preset": best, "rows": rows, "default": default,
        f"scaling_ray{num_gpus}_vs_process1": scaling, "phases": phases, "phase_gap_vs_plain_torch_s": gaps}


def phase_table(result: dict) -> tuple[dict, dict]:
    """Where each step's time goes. phases: {"plain_torch" (anchor_ds_phases.py) and "process/<preset>":
    s_per_step (unsynchronised), phased_step_s and phases_s (medians of the phase-timed steps)};
    gaps: per preset, each phase, the whole phased step and s_per_step minus plain torch's (s)."""
    keep = ("s_per_step", "phased_step_s", "phases_s")
    table = {}
    plain = result.get("anchor_phases") or {}
    if "phases_s" in plain:
        table["plain_torch"] = {k: plain[k] for k in keep}
    for name, r in (result.get("process") or {}).items():
        if isinstance(r, dict) and "phases_s" in r:
            table[f"process/{name}"] = {k: r[k] for k in keep}
    gaps = {}
    if "plain_torch" in table:
        base = table["plain_torch"]
        for row, t in table.items():
            if row != "plain_torch":
                gaps[row] = {**{k: round(t["phases_s"][k] - base["phases_s"][k], 4) for k in gpu_bench.PHASES},
                             "phased_step": round(t["phased_step_s"] - base["phased_step_s"], 4),
                             "s_per_step": round(t["s_per_step"] - base["s_per_step"], 4)}
    return table, gaps


if __name__ == "__main__":
    main()

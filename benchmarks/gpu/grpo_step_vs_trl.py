"""One GRPO step, ours vs TRL's GRPOTrainer, on the same workload, in one run on one GPU.

    python benchmarks/gpu/grpo_step_vs_trl.py                 # the H200 comparison (docs/gpu.md)
    python benchmarks/gpu/grpo_step_vs_trl.py --smoke         # CPU: tiny model, 2 steps, < 1 min

(a) TRL: anchors/anchor_trl_clocked.py (the recorded anchor_trl.py plus --generation and a step clock) as a
    subprocess with the same --bs/--gens/--maxlen/--steps and model shape: TRL 1.16 GRPOTrainer,
    transformers generate, reward len(completion) % 7, beta 0, bf16.
(b) Ours, on the same shapes: the anchor's tokenizer construction and Qwen2 config (random init), the
    anchor's prompts, bs/gens prompts per step each sampled gens times (bs completions of up to
    maxlen tokens), single turn: the colocated replica samples with policy.static.sampler (static KV
    cache + CUDA-graph decode step), reward len(text) % 7, group advantages (the plain GRPO loss of
    the mixed_task_reward profile), then rl.grpo.update_policy on our DeepSpeed engine (1 worker
    via run_in_process, bf16: N, packing, old log-probs, loss + backward, ONE optimizer step) and
    rl.engine.refresh_replica. One full step = generate + log-probs + update + sync. The engine is
    each --presets preset (default: `default`, the trainer's own defaults, what a user gets), or with
    --presets "" ZeRO --zero-stage (3) with --optimizer; the JSON records the stage each resolved to and
    why (zero_stage_resolved / _reason). Until c752bf6 the default was --presets "" (ZeRO-3, torch AdamW).

TRL runs once per --trl-generations mode (plain generate, kept for continuity; continuous batching;
static cache), each with a clock around every step. Every ratio comes two ways, the same on both
sides (ratios.py): steady (both after their first step) and end to end over the same n steps (both
including their first); the headline is steady against the fastest TRL mode. Also: the bytes one
decode step reads (weights + KV cache, from the shapes) and the share of the card's bandwidth that
is. Reports for both: completion tokens/s and s/step, our per-step split generate / reward / logprob /
train / sync (GPU-synchronised phase boundaries), and a torch.profiler summary of the top kernels
of one extra step (grpo_profile.txt; grpo_profile_<preset>.txt with several --presets, each timed
against the one TRL run). JSON: --out, else $OUT, else benchmarks/results/gpu/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402  (this folder; Ray-free here, but the workers live there)
import ratios  # noqa: E402

SMOKE = {"hidden": 64, "layers": 2, "heads": 4, "kv": 2, "inter": 128, "vocab": 512, "bs": 4, "gens": 2,
         "maxlen": 16, "steps": 2, "warmup": 0, "sampler": "static"}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the anchor's arguments, defaulting to the recorded anchor run (docs/gpu.md, Anchors)
    gpu_bench.add_model_args(p)
    p.add_argument("--steps", type=int, default=4, help="timed steps (TRL: --steps)")
    p.add_argument("--bs", type=int, default=32, help="completions per step (TRL per_device_train_batch_size)")
    p.add_argument("--gens", type=int, default=8, help="completions per prompt (TRL num_generations)")
    p.add_argument("--maxlen", type=int, default=512, help="max completion tokens")
    # ours
    p.add_argument("--warmup", type=int, default=1, help="our untimed steps first (compile, allocator)")
    p.add_argument("--sampler", default="auto", choices=["auto", "static", "hf"], help="auto = static on GPU")
    p.add_argument("--block-decode", default="auto", choices=["auto", "on", "off"],
                   help="the static sampler's block decoding (auto: CUDA-graph blocks of 8 tokens on a GPU; off: "
                   "one reduce-overhead replay per token, the sampler before block decoding)")
    p.add_argument("--fuse-projections", default="auto", choices=["auto", "on", "off"],
                   help="the static sampler's decode step with q/k/v and gate/up as one GEMM each (Llama / Qwen2; "
                   "auto: on when compiled on a GPU; off: the model's own forward)")
    p.add_argument("--compile-mode", default="reduce-overhead", choices=["reduce-overhead", "max-autotune"],
                   help="the static sampler's torch.compile mode (max-autotune: a kernel search for the decode GEMMs "
                   "at the first compile; the captured blocks use max-autotune-no-cudagraphs)")
    p.add_argument("--blas", default="default", choices=["default", "cublas", "cublaslt"],
                   help="torch.backends.cuda.preferred_blas_library in our run (cublaslt: cuBLASLt's kernels and "
                   "split-K choices for the batch-32 decode GEMMs)")
    p.add_argument("--attn", default="best", help="training attention: best = torch_varlen when it passes its "
                   "self-check on this GPU, else auto; or auto / sdpa / torch_varlen / flash_attention_2")
    p.add_argument("--zero-stage", type=lambda v: v if v == "auto" else int(v), default=3,
                   help="0..3, or auto (the trainer's default: chosen per model, world and GPU)")
    p.add_argument("--optimizer", default="torch", choices=["auto", "torch", "torch_fused", "deepspeed"])
    p.add_argument("--presets", default="default", help="comma-separated engine presets of gpu_bench.ENGINE_PRESETS "
                   f"({','.join(gpu_bench.ENGINE_PRESETS)}), each timed in turn against the one TRL run; "
                   "default: default, the trainer a user gets; empty = one run with --zero-stage / --optimizer")
    p.add_argument("--micro-batch-tokens", type=int, default=16384)
    p.add_argument("--no-profile", action="store_true", help="skip the profiled extra step")
    p.add_argument("--skip-trl", action="store_true")
    p.add_argument("--trl-generations", default="plain,continuous,static",
                   help="TRL's offline generation modes, each one TRL run: plain (transformers generate), continuous "
                   "(use_transformers_continuous_batching), static (cache_implementation='static')")
    p.add_argument("--trl-timeout", type=float, default=240.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="CPU smoke: tiny model, 2 steps")
    p.add_argument("--out", default=None, help="output folder (default $OUT, else benchmarks/results/gpu)")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):
        p.set_defaults(**SMOKE)  # smoke values are defaults: flags given beside --smoke still win
    a = p.parse_args(argv)
    if a.bs % a.gens:
        p.error("--bs must be a multiple of --gens")
    unknown = [n for n in a.presets.split(",") if n and n not in gpu_bench.ENGINE_PRESETS]
    if unknown:
        p.error(f"unknown presets {unknown}; known: {sorted(gpu_bench.ENGINE_PRESETS)}")
    return a


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    out, work, path, result = gpu_bench.start_run("grpo_step_vs_trl", a, argv)
    cuda = torch.cuda.is_available()
    t_all = time.perf_counter()

    # (a) the TRL anchor, as recorded: same shape and --bs/--gens/--maxlen/--steps
    result["trl_runs"] = {}
    for gen in ([] if a.skip_trl else [g for g in a.trl_generations.split(",") if g]):
        trl_args = [*gpu_bench.model_args(a), "--steps", a.steps, "--bs", a.bs, "--gens", a.gens, "--maxlen", a.maxlen,
                    "--out", work / f"trl_out_{gen}", "--generation", gen]
        print(f"trl [{gen}]: running anchors/anchor_trl_clocked.py", flush=True)
        log = None if a.smoke else out / ("trl_anchor.log" if gen == "plain" else f"trl_anchor_{gen}.log")
        result["trl_runs"][gen] = gpu_bench.run_anchor("anchor_trl_clocked.py", trl_args, timeout=a.trl_timeout,
                                                     log=log)
        print("trl", gen, json.dumps(result["trl_runs"][gen])[:600], flush=True)
        gpu_bench.write_json(path, result)
    # continuity: "trl" is plain generate when it ran, else the first mode
    runs = result["trl_runs"]
    if runs:
        result["trl"] = runs.get("plain", next(iter(runs.values())))

    # (b) ours
    from skillgate_core.rl.engine.deepspeed_engine import EngineConfig
    from skillgate_core.rl.engine.launch import run_in_process

    attn, why_not_varlen = gpu_bench.pick_attn(a.attn)
    tok = gpu_bench.anchor_tokenizer(a.vocab, a.seed)
    model_dir = work / "model"
    n_params = gpu_bench.save_random_model(gpu_bench.trl_model_config(a, tok), model_dir,
                                           dtype=torch.bfloat16 if cuda else torch.float32, tokenizer=tok, seed=a.seed)
    n_prompts = a.bs // a.gens
    prompts = tuple(tuple(tok(t, add_special_tokens=False)["input_ids"])
                    for t in gpu_bench.anchor_prompts(n_prompts * (a.warmup + a.steps + 1), a.seed))
    presets = [n for n in a.presets.split(",") if n] or [""]
    trl = result.get("trl", {})
    result["ours_presets"], result["ratio_presets"] = {}, {}
    if not any("steps_s" in r for r in result["trl_runs"].values()):
        result["ratio_note"] = "no TRL run with a step clock: no ratio"
    for name in presets:
        fields = {"zero_stage": a.zero_stage, "optimizer": a.optimizer} | dict(gpu_bench.ENGINE_PRESETS.get(name, {}))
        fields.setdefault("attn_implementation", attn)
        label = name or f"z{a.zero_stage}_{a.optimizer}"
        tag = f"_{label}" if len(presets) > 1 else ""
        engine = EngineConfig(lr=1e-6, dtype="bf16" if cuda else "fp32", **fields)
        job = gpu_bench.GRPOBenchJob(model_dir=str(model_dir), prompts=prompts, prompts_per_step=n_prompts,
                                     gens=a.gens, maxlen=a.maxlen, steps=a.steps, warmup=a.warmup,
                                     profile=not a.no_profile, engine=engine, sampler=a.sampler,
                                     micro_batch_tokens=a.micro_batch_tokens, seed=a.seed, out_dir=str(out), tag=tag,
                                     block_decode={"auto": None, "on": True, "off": False}[a.block_decode],
                                     fuse_projections={"auto": None, "on": True, "off": False}[a.fuse_projections],
                                     compile_mode=a.compile_mode, blas=a.blas)
        print(f"ours [{label}]: {n_params / 1e6:.1f}M params, attn {fields['attn_implementation']}, "
              f"sampler {a.sampler}, block decode {a.block_decode}, fused projections {a.fuse_projections}, "
              f"compile mode {a.compile_mode}, blas {a.blas}",
              flush=True)
        partial = out / f"grpo_ours{tag}.json"  # the worker's timed numbers, if it got that far
        try:
            ours = run_in_process(gpu_bench.grpo_bench_worker, job, run_dir=work / f"run{tag}", use_gpu=cuda).results[0]
        except Exception as exc:
            ours = json.loads(partial.read_text()) if partial.exists() else {}
            ours["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        partial.unlink(missing_ok=True)  # merged into the one JSON below
        ours |= {"preset": label, "engine": {k: v for k, v in fields.items()},
                 "params_M": round(n_params / 1e6, 1), "attn_requested": a.attn, "attn_used": attn,
                 "torch_varlen_not_used_because": why_not_varlen}
        result["ours_presets"][label] = ours
        if ours.get("records"):
            ours["decode_roofline"] = decode_roofline(a, ours, n_params, cuda)
            vs = {gen: ratios.symmetric_ratios(ratios.ours_steps(ours), ratios.anchor_steps(run))
                  for gen, run in result["trl_runs"].items() if "steps_s" in run}
            steady = {gen: r for gen, r in vs.items() if r["steady"]}
            if steady:
                best = max(steady, key=lambda g: steady[g]["steady"]["anchor"]["completion_tok_per_s"])
                result["ratio_presets"][label] = {
                    "against": best, "completion_tok_per_s": steady[best]["steady"]["completion_tok_per_s"],
                    "s_per_step": steady[best]["steady"]["s_per_step"],
                    "end_to_end_completion_tok_per_s": vs[best]["end_to_end"]["completion_tok_per_s"], "vs": vs}
        if "ours" not in result:
            result["ours"] = ours
            if label in result["ratio_presets"]:
                result["ratio"] = {k: v for k, v in result["ratio_presets"][label].items() if k != "vs"} | {
                    "note": "ours / TRL for tokens/s, TRL / ours for s/step (> 1 = ours faster), steady state on "
                            "both sides (each after its first step) against the fastest TRL generation mode "
                            "(`against`); end_to_end_*: both over the same first n steps, warm-up included; every "
                            "mode and convention: ratio_presets.<preset>.vs. ours = the first of --presets."}
        gpu_bench.write_json(path, result)
        gpu_bench.release()

    result["wall_s"] = round(time.perf_counter() - t_all, 1)
    gpu_bench.write_json(path, result)
    for label, ours in result["ours_presets"].items():
        rp = result["ratio_presets"].get(label, {})
        summary = {k: rp.get(k) for k in ("against", "completion_tok_per_s", "s_per_step",
                                          "end_to_end_completion_tok_per_s")}
        best = result["trl_runs"].get(rp.get("against", ""), trl)
        print("SUMMARY grpo_step_vs_trl", json.dumps({
            "preset": label, "trl_mode": rp.get("against"), "trl_steady_tok_s": best.get("steady_completion_tok_per_s"),
            "trl_steady_s_step": best.get("steady_s_per_step"),
            "ours_tok_s": ours.get("completion_tok_per_s"), "ours_s_step": ours.get("s_per_step"),
            "ours_generate_tok_s": ours.get("generate_tok_per_s"), "ours_split": ours.get("split_s_per_step"),
            "ratio": summary, "error": ours.get("error") or trl.get("error"), "json": str(path)}), flush=True)
    return result


def decode_roofline(a: argparse.Namespace, ours: dict, n_params: int, cuda: bool) -> dict:
    """Bytes one decode token-step reads at the timed steps' batch and cache length (weights + every row's
    keys and values over every slot: what the static cache reads), and the share of the card's
    bandwidth that is in the measured decode step time."""
    timed = [r for r in ours["records"] if r.get("kind") == "timed" and r.get("sampler")]
    if not timed:
        return {"why_not": "no timed step with sampler stats"}
    st = timed[-1]["sampler"]
    steps = sum(r["sampler"].get("decode_steps", 0) for r in timed)
    gen_s = sum(r["generate_s"] for r in timed)
    dtype_bytes = 2 if cuda else 4
    need = ratios.decode_bytes_per_step(param_bytes=n_params * dtype_bytes, rows=st.get("batch_bucket", a.bs),
                                        cache_slots=st.get("cache_length", a.maxlen), layers=a.layers,
                                        kv_heads=a.kv, head_dim=a.hidden // a.heads, dtype_bytes=dtype_bytes)
    step_s = gen_s / steps if steps else 0.0
    name = torch.cuda.get_device_name() if cuda else "cpu"
    return {"bytes_per_token_step": need, "decode_step_s": round(step_s, 6), "device": name,
            "hbm_bytes_per_s": ratios.hbm_bandwidth(name),
            "share_of_hbm_roofline": ratios.roofline_share(need["total"], step_s, ratios.hbm_bandwidth(name)),
            "note": "decode_step_s = generate time / decode steps (includes prefill and sampling: an upper bound on "
                    "the decode step, so the share is a lower bound)"}


if __name__ == "__main__":
    main()

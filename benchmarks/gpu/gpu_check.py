"""GPU check of the distributed training layer (a GPU script, not a pytest module: CI has no GPU). Run on nvidia-h200-x2 on 2026-11-30: benchmarks/results/gpu_check_h200x2.json.

On the GPU machine, from the repo root, with the dev bundle (docs/gpu.md, What travels: deepspeed, ray):

    bash .devbundle/install_bundle.sh && export PYTHONPATH=/tmp/site:$PWD:$PWD/tests/rl || exit 1
    RAY_AUTH_MODE=disabled python3 benchmarks/gpu/gpu_check.py --gpus 2 --out $OUT/gpu_check.json

(tests/rl stays on PYTHONPATH: the check runs the RL tests' own workers, rl_workers.py and test_rl_packing.py.)

It builds a tiny Qwen2 there (or takes `--model-dir`, any HF causal LM folder: SmolLM2-135M-Instruct as
skillgate_core.policy.smollm2.convert_smollm2 writes it) and records (JSON + stdout), without asserting, so
one run shows all:
  packed        max |packed - per-sequence| log-prob on one GPU, for sdpa (fp32, bf16) and, when
                flash-attn is importable, flash_attention_2 (varlen via cu_seqlens) in bf16;
  engine        engine_checks_worker on N GPUs (ZeRO-3 bf16 over NCCL): placeholders, exact gather,
                rho == 1 exactly, reference == policy;
  step_fp32     grpo_step_worker, fp32, 1 GPU (run_in_process) vs N GPUs (launch_ray): loss,
                grad norm, max weight gap, replica logit gap;
  step_bf16     the same step in bf16 on N GPUs: replica == gathered weights, replica logit gap.

`--cpu` runs the engine checks and step_fp32 on N CPU workers over gloo instead (no packed, no bf16): the
1-vs-N agreement of a model on a machine without GPUs (benchmarks/results/cpu_zero3_workers_smollm2/).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from rl_workers import StepCase, engine_checks_worker, grpo_step_worker
from test_rl_packing import make_samples
from transformers import AutoModelForCausalLM

from skillgate_core.policy.local_sampler import sequence_logprobs
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model
from skillgate_core.rl.engine.deepspeed_engine import EngineConfig
from skillgate_core.rl.engine.launch import LaunchConfig, launch_ray, run_in_process
from skillgate_core.rl.engine.logprobs import token_logprobs
from skillgate_core.rl.engine.packing import PackingConfig, pack_samples, unpack

HERE = Path(__file__).parent


def packed_gap(model_dir: Path, attn: str, dtype: torch.dtype) -> float:  # on the GPU
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation=attn).cuda().eval()
    samples = make_samples(16, seed=1, vocab=model.config.vocab_size, max_len=200)
    mbs = pack_samples(samples, PackingConfig(max_tokens=512))
    with torch.no_grad():
        packed = unpack(mbs, [token_logprobs(model, mb) for mb in mbs], len(samples))
        return max(
            (p - sequence_logprobs(model, s.prompt_ids, s.response_ids)).abs().max().item()
            for p, s in zip(packed, samples, strict=True)
        )


def step_summary(r: dict) -> dict:
    return {k: v for k, v in r.items() if k != "weights"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count(), help="workers (GPUs, or CPU workers)")
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    parser.add_argument("--model-dir", type=Path, default=None, help="an HF causal LM folder (default: a tiny Qwen2)")
    parser.add_argument("--cpu", action="store_true", help="engine + step_fp32 on CPU workers over gloo")
    args = parser.parse_args()
    if args.model_dir is not None and not (args.model_dir / "config.json").is_file():
        parser.error(f"--model-dir {args.model_dir}: expected an HF model folder with a config.json")
    if args.gpus < 1:
        parser.error(f"--gpus: expected at least one worker, got {args.gpus}")
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    if args.model_dir is None:
        shape = TinyModelConfig(vocab_size=2048, corpus_lines=2000, hidden_size=256, intermediate_size=768,
                                num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4)  # fmt: skip
        model_dir = build_tiny_model(shape, {}, work).outputs["base_model"]
    else:
        model_dir = args.model_dir.resolve()
    gpu = not args.cpu
    report: dict = {"workers": args.gpus, "device": torch.cuda.get_device_name(0) if gpu else "cpu (gloo)",
                    "torch": torch.__version__, "model_dir": str(model_dir)}
    t0 = time.time()
    if gpu:
        from transformers.utils import is_flash_attn_2_available

        report["packed"] = {"sdpa_fp32": packed_gap(model_dir, "sdpa", torch.float32),
                            "sdpa_bf16": packed_gap(model_dir, "sdpa", torch.bfloat16)}  # fmt: skip
        if is_flash_attn_2_available():
            report["packed"]["flash2_bf16"] = packed_gap(model_dir, "flash_attention_2", torch.bfloat16)

    launch = LaunchConfig(num_workers=args.gpus, use_gpu=gpu, pythonpath=(str(HERE),), storage_path=str(work / "runs"))
    report["engine"] = launch_ray(engine_checks_worker, str(model_dir), launch).results[0]
    report["step_fp32"] = compare_step(model_dir, launch, work, use_gpu=gpu)
    if gpu:
        bf16 = StepCase(model_dir=str(model_dir), engine=EngineConfig(lr=1e-3, dtype="bf16"), num_samples=8,
                        max_tokens=96)
        report["step_bf16"] = step_summary(launch_ray(grpo_step_worker, bf16, launch).results[0])
    report["seconds"] = round(time.time() - t0, 1)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    json.dump(report, sys.stdout, indent=2, default=str)


def compare_step(model_dir: Path, launch: LaunchConfig, work: Path, use_gpu: bool) -> dict:
    """The same fp32 ZeRO-3 GRPO step (stage 3 on both sides, not the automatic choice) on one worker (in
    this process) and on launch's N workers: loss, grad norm, and the largest gap between the weights each
    leaves."""
    fp32 = StepCase(model_dir=str(model_dir), engine=EngineConfig(lr=1e-3, dtype="fp32", zero_stage=3), num_samples=8,
                    max_tokens=96)
    solo = run_in_process(grpo_step_worker, fp32, run_dir=work / "solo", use_gpu=use_gpu).results[0]
    many = launch_ray(grpo_step_worker, fp32, launch).results[0]
    w1, wn = torch.load(solo["weights"]), torch.load(many["weights"])
    return {"one_worker": step_summary(solo), "n_workers": step_summary(many),
            "max_weight_gap": max((w1[k] - wn[k]).abs().max().item() for k in w1)}


if __name__ == "__main__":
    main()

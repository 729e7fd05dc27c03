"""Shared parts of the GPU benchmarks (grpo_step_vs_trl.py, trainer_throughput.py).

An importable module, not a script: Ray Train workers import the per-worker functions below by
name (launch_ray puts this folder on their PYTHONPATH). It holds:

- the anchors' model and tokenizer construction, mirrored from anchors/anchor_trl.py and
  anchors/anchor_ds.py (same words, corpus recipe, BPE trainer, Qwen2Config arguments), so our side
  of each comparison runs the anchor's exact shapes;
- `run_anchor`: an anchor script (benchmarks/gpu/anchors/, kept byte-identical to the recorded anchors) as a subprocess,
  its last JSON line parsed;
- `grpo_bench_worker`: our GRPO step, single-turn (generate -> reward -> update_policy -> refresh);
- `throughput_worker`: our packed-row training step (packing + token_logprobs + selector_grpo_loss
  + one optimizer step) per engine variant, and where its time goes (`phase_medians`);
- JSON / profiler / machine helpers.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ANCHORS = HERE / "anchors"
PEAK_FLOPS = 790e12
"""bf16 dense matrix rate measured on this workplace's H200 (the MFU denominator of docs/gpu.md, Anchors)."""

# --- the anchors' shapes ------------------------------------------------------------------------

WORDS = ["read", "skill", "exec", "file", "grep", "the", "task", "oracle", "ls", "cat", "json", "tool", "call", "result"]
"""anchor_trl.py's vocabulary of words (corpus and prompts)."""


def add_model_args(p: Any) -> None:
    """The anchors' model-shape arguments (anchor_trl.py / anchor_ds.py), with their defaults."""
    # Mirrors the anchors' argparse lines: anchors/ are the recorded anchor scripts, unchanged.
    p.add_argument("--hidden", type=int, default=896)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv", type=int, default=2)
    p.add_argument("--inter", type=int, default=4864)
    p.add_argument("--vocab", type=int, default=32000)


def model_args(a: Any) -> list[Any]:
    """`add_model_args`'s values as an anchor's command line (--hidden N --layers N ...)."""
    return [x for name in ("hidden", "layers", "heads", "kv", "inter", "vocab") for x in (f"--{name}", getattr(a, name))]


def anchor_tokenizer(vocab: int, seed: int):
    """anchor_trl.py's tokenizer: byte-level BPE trained on 3000 random lines of WORDS + digits
    (the anchor does not seed `random`; we do, for a reproducible side)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(WORDS) + str(rng.randint(0, 999)) for _ in range(40)) for _ in range(3000)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>", "<pad>", "<eos>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")


def anchor_prompts(n: int, seed: int) -> list[str]:
    """anchor_trl.py's prompts: "task" + 30 random words."""
    rng = random.Random(seed + 1)
    return ["task " + " ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(n)]


def trl_model_config(a: Any, hf_tok: Any):
    """anchor_trl.py's Qwen2Config (vocab = the trained tokenizer's size)."""
    from transformers import Qwen2Config

    return Qwen2Config(vocab_size=len(hf_tok), hidden_size=a.hidden, num_hidden_layers=a.layers,
                       num_attention_heads=a.heads, num_key_value_heads=a.kv, intermediate_size=a.inter,
                       max_position_embeddings=4096, pad_token_id=hf_tok.pad_token_id,
                       eos_token_id=hf_tok.eos_token_id, bos_token_id=hf_tok.eos_token_id)


def ds_model_config(a: Any):
    """anchor_ds.py's Qwen2Config (415M at the defaults; untied embeddings)."""
    from transformers import Qwen2Config

    return Qwen2Config(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                       num_attention_heads=a.heads, num_key_value_heads=a.kv, intermediate_size=a.inter,
                       max_position_embeddings=8192)


def save_random_model(cfg: Any, out: Path, *, dtype: torch.dtype, tokenizer: Any = None, seed: int = 0) -> int:
    """A randomly initialised Qwen2ForCausalLM of `cfg` written as an HF model dir; returns its
    parameter count (the anchors' N: every parameter, embeddings included)."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg)
    model.to(dtype)
    model.generation_config.eos_token_id = cfg.eos_token_id
    model.generation_config.pad_token_id = cfg.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return n


BIG = 5 * 10**8
ENGINE_PRESETS: dict[str, dict[str, Any]] = {
    # EngineConfig fields per named preset (trainer_throughput.py --variants, grpo_step_vs_trl.py --presets)
    # default: what a user gets, EngineConfig's own defaults (the stage resolved per model, world and GPU)
    "default": {"zero_stage": "auto", "optimizer": "auto"},
    # the AdamW update in one kernel: what "auto" picks on a GPU since c752bf6 (the default there measured
    # it as default_fused; on CPU it differs from default)
    "default_fused": {"zero_stage": "auto", "optimizer": "torch_fused"},
    # the default before c752bf6: per-tensor AdamW, DeepSpeed's bf16 optimizer norms and clips parameter by parameter
    "default_dsnorm": {"zero_stage": "auto", "optimizer": "torch", "flat_grad_norm": False},
    # per-tensor AdamW with bf16.immediate_grad_update: fp32 gradients accumulated in backward hooks
    "default_igu": {"zero_stage": "auto", "optimizer": "torch", "bf16_overrides": (("immediate_grad_update", True),)},
    # default_igu with fused AdamW
    "default_fused_igu": {"zero_stage": "auto", "optimizer": "torch_fused",
                          "bf16_overrides": (("immediate_grad_update", True),)},
    "z3": {"zero_stage": 3, "optimizer": "torch"},
    "z3_persist": {"zero_stage": 3, "optimizer": "torch_fused", "zero_overrides": (
        ("stage3_param_persistence_threshold", 10**11), ("stage3_max_live_parameters", 10**11),
        ("stage3_prefetch_bucket_size", BIG), ("reduce_bucket_size", BIG))},
    "z2": {"zero_stage": 2, "optimizer": "torch_fused", "zero_overrides": (
        ("reduce_bucket_size", BIG), ("allgather_bucket_size", BIG))},
    "z1": {"zero_stage": 1, "optimizer": "torch_fused"},  # bf16 without partitioning on one GPU
    "z0": {"zero_stage": 0, "optimizer": "torch_fused"},  # fp32 only: DeepSpeed refuses bf16 at stage 0
    "z3_sdpa": {"zero_stage": 3, "optimizer": "torch", "attn_implementation": "sdpa"},
    "z3_ckpt": {"zero_stage": 3, "optimizer": "torch", "gradient_checkpointing": True},
    "z2_nooverlap": {"zero_stage": 2, "optimizer": "torch_fused", "zero_overrides": (
        ("reduce_bucket_size", BIG), ("allgather_bucket_size", BIG), ("overlap_comm", False))},
}


# --- small helpers --------------------------------------------------------------------------------

def out_dir(arg: str | None) -> Path:
    """--out if given, else $OUT (the device machine's convention), else benchmarks/results/gpu."""
    path = Path(arg) if arg else Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "benchmarks" / "results" / "gpu"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                            "cuda": torch.cuda.is_available(), "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    # the host CPU: the TRL anchor's HF generate is host-bound, and its s/step moved 10.2 -> 20.7 s between
    # lent machines of one kind (benchmarks/results/gpu/LOG.md 1); this says which host a ratio ran on
    info["cpu_model"] = cpu_model()
    for name in ("transformers", "deepspeed", "trl", "ray"):
        try:
            info[name] = __import__(name).__version__
        except Exception as exc:  # absent on this machine: say so, do not fail
            info[name] = f"unavailable ({type(exc).__name__})"
    try:  # SKILLGATE_GIT_COMMIT: a copy of a worktree carried without its .git names its commit so
        info["git"] = os.environ.get("SKILLGATE_GIT_COMMIT") or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip() or None
    except Exception:
        info["git"] = None
    return info


def cpu_model() -> str | None:
    """The host CPU's model name (/proc/cpuinfo), None where it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def start_run(name: str, a: Any, argv: Sequence[str] | None) -> tuple[Path, Path, Path, dict[str, Any]]:
    """What each benchmark's main opens with: FutureWarnings off (DeepSpeed's deprecated-collective
    notices), the out folder (`out_dir`), a scratch folder whose home/ is the state dir (`setup_env`),
    the JSON path out/NAME.json and the result dict naming the run. Returns (out, work, json path, result)."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    out = out_dir(a.out)
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    setup_env(work / "home")
    result: dict[str, Any] = {"benchmark": name, "argv": sys.argv[1:] if argv is None else argv,
                              "args": vars(a), "machine": machine()}
    return out, work, out / f"{name}.json", result


def setup_env(home: Path) -> None:
    """State dir, a stable DeepSpeed extension cache, Ray without auth tokens or NVLink multicast."""
    os.environ.setdefault("SKILLGATE_HOME", str(home))
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", f"/tmp/skillgate-torch-extensions-{os.getuid()}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for key, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(key, value)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def run_anchor(script: str, args: Sequence[str], *, timeout: float, log: Path | None = None,
               folder: Path = ANCHORS) -> dict[str, Any]:
    """Run folder/<script> (default anchors/) with `args` in a subprocess; its last JSON line, plus wall
    time, or an error."""
    cmd = [sys.executable, str(folder / script), *map(str, args)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return {"error": f"timed out after {timeout:.0f} s", "cmd": " ".join(cmd), "stdout_tail": out[-2000:]}
    wall = time.perf_counter() - t0
    if log is not None:
        log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    parsed = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                parsed = json.loads(line)
                break
    if proc.returncode != 0 or parsed is None:
        return {"error": f"exit {proc.returncode}", "cmd": " ".join(cmd), "stderr_tail": proc.stderr[-3000:],
                "stdout_tail": proc.stdout[-1000:]}
    return {**parsed, "subprocess_wall_s": round(wall, 2), "cmd": " ".join(cmd)}


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


PHASES = ("forward", "backward", "optimizer_step")
"""The phases of one training step that `phase_medians` times: forward (with the loss), backward, and
the optimizer step (with zeroing the gradients)."""

Phase = Callable[[str], contextlib.AbstractContextManager[Any]]
"""What a timed step brackets each of its PHASES with: `with phase("forward"): ...`."""


def phase_medians(step: Callable[[Phase], None], n: int) -> dict[str, Any]:
    """Where a training step's time goes: `step(phase)` runs n times, a StepTimer(sync_cuda=True)
    (skillgate_core.rl.step_metrics) behind `phase`, so each phase waits for the GPU at its start and
    end and is charged for its own kernels (on CPU: plain wall time). Medians over the n steps:
    {"phases_s": {phase: s}, "phased_step_s": the whole step, "phase_steps": n}; {} when n is 0.

    The syncs take away the host/device overlap between phases, so phased_step_s may exceed the
    unsynchronised s/step a little: callers time throughput on other steps, without them."""
    from skillgate_core.rl.step_metrics import StepTimer

    if n <= 0:
        return {}
    runs = []
    for _ in range(n):
        timer = StepTimer(sync_cuda=True)
        with timer.phase("step"):
            step(timer.phase)
        runs.append(timer.seconds)
    return {"phases_s": {k: round(statistics.median(r.get(k, 0.0) for r in runs), 6) for k in PHASES},
            "phased_step_s": round(statistics.median(r["step"] for r in runs), 6), "phase_steps": n}


def profiled_step(step: Callable[[Phase], None]) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """One `step(phase)` under torch.profiler, its PHASES labelled (record_function): `profile_summary`
    of it (top kernels and operators, and the profiler's table, where the phases are rows too)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        step(record_function)
        sync()
    return profile_summary(prof)


def release(*objects: Any) -> None:
    """Drop engines / models and give their memory back (DeepSpeed hooks first)."""
    for obj in objects:
        destroy = getattr(obj, "destroy", None)
        if callable(destroy):
            with contextlib.suppress(Exception):
                destroy()
    del objects
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def profile_summary(prof: Any, *, rows: int = 15) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """What one profiled step spent its time on: {"kernels": the top GPU kernels by device time (CPU
    runs: empty), "ops": the top operators by self device time (CPU runs: self CPU time)}, and the
    profiler's own operator table."""
    cuda = torch.cuda.is_available()
    events = list(prof.key_averages())

    def device_us(e: Any) -> float:
        values = [getattr(e, n, None) for n in ("self_device_time_total", "self_cuda_time_total",
                                                 "device_time_total", "cuda_time_total")]
        return max([float(v) for v in values if v is not None] or [0.0])

    def is_kernel(e: Any) -> bool:
        return "CUDA" in str(getattr(e, "device_type", "")) or "PrivateUse1" in str(getattr(e, "device_type", ""))

    def listing(items: list[Any], key: Any) -> list[dict[str, Any]]:
        total = sum(key(e) for e in items) or 1.0
        top = sorted(items, key=key, reverse=True)[:rows]
        return [{"name": e.key[:160], "calls": int(e.count), "ms": round(key(e) / 1e3, 3),
                 "share": round(key(e) / total, 4)} for e in top]

    kernels = [e for e in events if is_kernel(e)] if cuda else []
    ops = [e for e in events if not is_kernel(e)]
    out = {"kernels": listing(kernels, device_us),
           "ops": listing(ops, (lambda e: float(getattr(e, "self_device_time_total", 0.0) or 0.0)) if cuda
                          else (lambda e: float(e.self_cpu_time_total)))}
    table = ""
    for sort_by in (("self_device_time_total", "self_cuda_time_total") if cuda else ("self_cpu_time_total",)):
        with contextlib.suppress(Exception):
            table = prof.key_averages().table(sort_by=sort_by, row_limit=2 * rows, max_name_column_width=100)
            break
    return out, table


def pick_attn(requested: str) -> tuple[str, str | None]:
    """The training attention to use, and why 'best' did not pick torch_varlen (None if it did)."""
    if requested != "best":
        return requested, None
    from skillgate_core.rl.engine.varlen_attention import TORCH_VARLEN, self_check, torch_varlen_available

    if not torch_varlen_available():
        return "auto", "torch varlen kernel unavailable (no CUDA or torch without nn.attention.varlen)"
    problem = self_check("cuda", torch.bfloat16)
    return ("auto", problem) if problem else (TORCH_VARLEN, None)


# --- our GRPO step (grpo_step_vs_trl.py) ------------------------------------------------------------

@dataclass(frozen=True)
class GRPOBenchJob:
    """One run of our single-turn GRPO step on the anchor's workload."""

    model_dir: str
    prompts: tuple[tuple[int, ...], ...]
    """Tokenized prompts; step i uses prompts[i*P : (i+1)*P] (cyclic), each repeated `gens` times."""
    prompts_per_step: int
    gens: int
    maxlen: int
    steps: int
    warmup: int
    profile: bool
    engine: Any
    """skillgate_core.rl.engine.EngineConfig."""
    sampler: str
    micro_batch_tokens: int
    seed: int
    out_dir: str
    tag: str = ""
    """Suffix of this run's files (grpo_ours{tag}.json, grpo_profile{tag}.txt)."""
    block_decode: bool | None = None
    """StaticSamplerConfig(block_decode=...): None = its default (CUDA-graph blocks on a GPU), False = per step."""
    fuse_projections: bool | None = None
    """StaticSamplerConfig(fuse_projections=...): None = its default (fused when compiled on CUDA and the model is
    fusable), True = q/k/v and gate/up as one GEMM each, False = the model's own forward decodes."""
    compile_mode: str = "reduce-overhead"
    """StaticSamplerConfig(compile_options={"mode": ...}): "reduce-overhead" (its default) or "max-autotune" (a kernel
    search for the decode GEMMs at the first compile)."""
    blas: str = "default"
    """torch.backends.cuda.preferred_blas_library for the run: "default" leaves PyTorch's choice (cuBLAS for a
    plain matmul), "cublaslt" asks for cuBLASLt (other kernels and split-K heuristics for the batch-32 decode
    GEMMs), "cublas" forces cuBLAS."""


def _phase_names() -> tuple[str, ...]:
    return ("generate", "reward", "logprob", "train", "sync")


def grpo_bench_worker(ctx: Any, job: GRPOBenchJob) -> dict[str, Any]:
    """Our GRPO step, timed: generate (replica + sampler) -> reward len(text) % 7 -> group advantages
    -> update_policy (N, packing, old log-probs, loss/backward, one optimizer step) -> refresh_replica.

    The summary is also written to out_dir/grpo_ours.json before the profiled step, so a profiler
    failure (or a kill by the caller's timeout) still leaves the timed numbers."""
    from transformers import AutoTokenizer

    from skillgate_core.rl.engine.deepspeed_engine import build_engine, load_replica, resolve_zero
    from skillgate_core.rl.grpo_config import GRPOConfig
    from skillgate_core.rl.profiles import get_profile

    cuda = ctx.device.startswith("cuda")
    if cuda and job.blas != "default":
        torch.backends.cuda.preferred_blas_library(job.blas)
    tok = AutoTokenizer.from_pretrained(job.model_dir)
    t0 = time.perf_counter()
    zero = resolve_zero(job.model_dir, job.engine)
    engine = build_engine(job.model_dir, job.engine, zero=zero)
    replica = load_replica(job.model_dir, job.engine)
    setup_s = time.perf_counter() - t0
    profile = get_profile("mixed_task_reward")
    cfg = GRPOConfig(profile=profile.name, beta=0.0, num_workers=1, launcher="process",
                     prompts_per_step=job.prompts_per_step, group_size=job.gens, use_gpu=cuda,
                     bf16=job.engine.dtype == "bf16", temperature=1.0, max_new_tokens=job.maxlen,
                     micro_batch_tokens=job.micro_batch_tokens, learning_rate=job.engine.lr, sampler=job.sampler)
    state = {"engine": engine, "replica": replica, "tok": tok, "cfg": cfg,
             "device": torch.device(ctx.device)}
    records = []
    for i in range(job.warmup + job.steps):
        records.append(_grpo_step(job, state, i, "warmup" if i < job.warmup else "timed"))
    summary = _grpo_summary(records) | {
        "setup_s": round(setup_s, 2), "attn_implementation": str(getattr(engine.module.config, "_attn_implementation", "?")),
        "peak_mem_GB": round(torch.cuda.max_memory_allocated() / 1e9, 2) if cuda else None, "blas": job.blas,
        **zero_record(zero)}
    write_json(Path(job.out_dir) / f"grpo_ours{job.tag}.json", summary)
    if job.profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        try:
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            with torch_profile(activities=acts) as prof:
                records.append(_grpo_step(job, state, job.warmup + job.steps, "profiled"))
            summary["profile_top"], table = profile_summary(prof)
            (Path(job.out_dir) / f"grpo_profile{job.tag}.txt").write_text(table)
        except Exception as exc:  # the timed numbers stand without it
            summary["profile_error"] = f"{type(exc).__name__}: {exc}"[:800]
        summary["records"] = records
        write_json(Path(job.out_dir) / f"grpo_ours{job.tag}.json", summary)
    return summary


def _grpo_step(job: GRPOBenchJob, state: dict[str, Any], i: int, kind: str) -> dict[str, Any]:
    import numpy as np

    from skillgate_core.credit import task_advantages
    from skillgate_core.policy.local_sampler import SamplingConfig
    from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig, resolve_sampler, sample_batch
    from skillgate_core.rl.engine.deepspeed_engine import refresh_replica
    from skillgate_core.rl.grpo import update_policy
    from skillgate_core.rl.samples import CreditedSample
    from skillgate_core.rl.step_metrics import StepTimer

    engine, replica, tok, cfg = state["engine"], state["replica"], state["tok"], state["cfg"]
    p, g = job.prompts_per_step, job.gens
    timer = StepTimer(sync_cuda=True)
    start = time.perf_counter()
    batch = [job.prompts[(i * p + k) % len(job.prompts)] for k in range(p) for _ in range(g)]
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=job.maxlen, seed=job.seed + i, sampler=cfg.sampler)
    with timer.phase("generate"):
        if resolve_sampler(sampling, replica) == "static" and "static_sampler" not in state:
            state["static_sampler"] = StaticSampler(replica, tok, StaticSamplerConfig(block_decode=job.block_decode,
                                                    fuse_projections=job.fuse_projections,
                                                    compile_options={"mode": job.compile_mode}))  # kept across steps
        comps = sample_batch(replica, tok, batch, sampling, static=state.get("static_sampler"))
    with timer.phase("reward"):
        rewards = [float(len(c.text) % 7) for c in comps]  # the anchor's reward
        samples = []
        for k in range(p):
            adv = task_advantages(rewards[k * g : (k + 1) * g])
            for j in range(g):
                c = comps[k * g + j]
                ones, zeros = np.ones(len(c.token_ids)), np.zeros(len(c.token_ids))
                samples.append(CreditedSample(f"prompt{k}", tuple(batch[k * g + j]), tuple(c.token_ids), ones,
                                              np.full(len(c.token_ids), adv[j]), zeros, ones, zeros))
    _, losses, _ = update_policy(engine, None, samples, cfg, pad_token_id=tok.pad_token_id or 0,
                                 device=state["device"], timer=timer)
    with timer.phase("sync"):
        refresh_replica(replica, engine)
    wall = time.perf_counter() - start
    lengths = [len(c.token_ids) for c in comps]
    rec = {"step": i, "kind": kind, "wall_s": round(wall, 4),
           **{f"{k}_s": round(timer.seconds.get(k, 0.0), 4) for k in _phase_names()},
           "completion_tokens": sum(lengths), "mean_len": sum(lengths) / len(lengths),
           "generate_tok_per_s": round(sum(lengths) / max(1e-9, timer.seconds["generate"]), 1),
           "stopped": sum(c.finish == "stop" for c in comps), "reward_mean": sum(rewards) / len(rewards),
           "policy_loss": sum(float(x.policy_task) for x in losses), "micro_batches": len(losses)}
    if "static_sampler" in state:
        rec["sampler"] = dict(state["static_sampler"].stats)
    print("ours", json.dumps(rec), flush=True)
    return rec


def _grpo_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    timed = [r for r in records if r["kind"] == "timed"]
    first = [r for r in records if r["kind"] != "profiled"]
    wall = sum(r["wall_s"] for r in timed)
    tokens = sum(r["completion_tokens"] for r in timed)
    gen = sum(r["generate_s"] for r in timed)
    return {
        "steps": len(timed), "s_per_step": round(wall / max(1, len(timed)), 4), "completion_tokens": tokens,
        "completion_tok_per_s": round(tokens / wall, 1) if wall else None,
        "generate_tok_per_s": round(tokens / gen, 1) if gen else None,
        "s_per_step_incl_warmup": round(sum(r["wall_s"] for r in first) / max(1, len(first)), 4),
        "completion_tok_per_s_incl_warmup": round(sum(r["completion_tokens"] for r in first)
                                                  / max(1e-9, sum(r["wall_s"] for r in first)), 1),
        "split_s_per_step": {k: round(sum(r[f"{k}_s"] for r in timed) / max(1, len(timed)), 4) for k in _phase_names()},
        "records": records,
    }


# --- our trainer's packed-row step (trainer_throughput.py) --------------------------------------------

@dataclass(frozen=True)
class ThroughputJob:
    """Engine variants to time on every rank."""

    model_dir: str
    variants: tuple[tuple[str, Any], ...]
    """(name, EngineConfig) pairs."""
    seq: int
    mb: int
    steps: int
    warmup: int
    prompt_len: int
    flops_per_token: float
    timeout_s: float = 0.0
    """Skip the variants left once this many seconds have passed (0 = no limit)."""
    notes: dict[str, str] = field(default_factory=dict)
    phase_steps: int = 0
    """After the timed steps, this many more with each phase synchronised (`phase_medians`): the row's
    phases_s, phased_step_s (0 = none)."""
    profile_dir: str = ""
    """Non-empty: then one more step per variant under torch.profiler (`profiled_step`): its top kernels
    and operators in the row (profile_top), the profiler's table in
    profile_dir/trainer_profile_<variant>.txt (rank 0)."""


def synthetic_samples(job: ThroughputJob, vocab: int, seed: int) -> list[Any]:
    """mb samples of seq tokens (prompt_len prompt + the rest response) with GRPO fields: every
    response token in the loss; a few identity tokens carry selector credit instead of task credit."""
    import numpy as np

    from skillgate_core.rl.engine.packing import TrainSample

    rng = np.random.default_rng(seed)
    out = []
    for i in range(job.mb):
        r = job.seq - job.prompt_len
        w_sel = (rng.random(r) < 0.01).astype(np.float64)
        out.append(TrainSample(
            prompt_ids=rng.integers(3, vocab, job.prompt_len).tolist(),
            response_ids=rng.integers(3, vocab, r).tolist(),
            fields={"mask": np.ones(r), "a_task": np.full(r, 1.0 if i % 2 else -1.0), "a_sel": np.full(r, 0.5),
                    "w_task": 1.0 - w_sel, "w_sel": w_sel},
        ))
    return out


def no_phase(name: str) -> contextlib.AbstractContextManager[Any]:
    """The `Phase` of an untimed step: nothing around any phase."""
    return contextlib.nullcontext()


def _train_step(engine: Any, micro_batches: list[Any], normaliser: float, phase: Phase = no_phase) -> None:
    """One optimizer step of the trainer's inner loop: per micro-batch token_logprobs ->
    selector_grpo_loss (rho = 1, old = detached current) -> backward; then the optimizer step. `phase`
    brackets the PHASES (forward: log-probs and loss; backward; optimizer_step)."""
    from skillgate_core.rl.engine.deepspeed_engine import backward, optimizer_step
    from skillgate_core.rl.engine.logprobs import token_logprobs
    from skillgate_core.rl.loss import selector_grpo_loss

    for m in micro_batches:
        f = m.fields
        with phase("forward"):
            logp = token_logprobs(engine, m, 1.0)
            out = selector_grpo_loss(logp, logp.detach(), f["a_task"], f["a_sel"], f["w_task"], f["w_sel"],
                                     f["mask"], normaliser, selector_coef=0.2, beta=0.0)
        with phase("backward"):
            backward(engine, out.loss)
    with phase("optimizer_step"):
        optimizer_step(engine)


def _time_variant(ctx: Any, job: ThroughputJob, name: str, ecfg: Any) -> dict[str, Any]:
    from skillgate_core.rl.engine import collectives
    from skillgate_core.rl.engine.deepspeed_engine import build_engine, resolve_zero
    from skillgate_core.rl.engine.logprobs import packs_varlen
    from skillgate_core.rl.engine.packing import PackingConfig, pack_samples
    from skillgate_core.rl.loss import global_token_normaliser

    cuda = ctx.device.startswith("cuda")
    engine = None
    try:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        zero = resolve_zero(job.model_dir, ecfg)
        engine = build_engine(job.model_dir, ecfg, zero=zero)
        build_s = time.perf_counter() - t0
        samples = synthetic_samples(job, engine.module.config.vocab_size, seed=ctx.rank)
        varlen = packs_varlen(engine)
        packing = PackingConfig(max_tokens=job.mb * job.seq, max_samples=0 if varlen else 1)
        mbs = [m.to(torch.device(ctx.device)) for m in pack_samples(samples, packing)]
        normaliser = collectives.all_reduce_sum(global_token_normaliser(s.fields["mask"] for s in samples))
        for _ in range(job.warmup):
            _train_step(engine, mbs, normaliser)
        sync()
        collectives.barrier()
        t0 = time.perf_counter()
        for _ in range(job.steps):
            _train_step(engine, mbs, normaliser)
        sync()
        collectives.barrier()
        dt = time.perf_counter() - t0
        per_rank = collectives.all_gather_objects(job.mb * job.seq * job.steps / dt)
        per_gpu = sum(per_rank) / len(per_rank)
        # where the time goes: more steps, after the timed ones, so the syncs do not touch tok/s
        phases = phase_medians(lambda phase: _train_step(engine, mbs, normaliser, phase), job.phase_steps)
        profile = _profile_variant(ctx, job, name, lambda phase: _train_step(engine, mbs, normaliser, phase))
        return {
            "tok_per_s": round(sum(per_rank)), "tok_per_s_per_gpu": round(per_gpu),
            "mfu_vs_790T": round(per_gpu * job.flops_per_token / PEAK_FLOPS, 3),
            "s_per_step": round(dt / job.steps, 4), "micro_batches_per_step": len(mbs),
            "attn": str(engine.module.config._attn_implementation), "packs_varlen": varlen,
            "engine_build_s": round(build_s, 1), "world_size": ctx.world_size,
            "peak_mem_GB": round(torch.cuda.max_memory_allocated() / 1e9, 1) if cuda else None,
            "optimizer_class": type(engine.optimizer).__name__,
            # EngineConfig.flat_grad_norm took: the bf16 optimizer's get_grads_for_norm is the flat one
            "flat_grad_norm_installed": "get_grads_for_norm" in vars(engine.optimizer),
            "config": {k: v for k, v in vars(ecfg).items()
                       if k in ("zero_stage", "optimizer", "zero_overrides", "bf16_overrides", "flat_grad_norm",
                                "gradient_checkpointing", "dtype")},
            **zero_record(zero), **phases, **profile,
        }
    except Exception as exc:  # one variant failing must not lose the others' numbers
        return {"error": f"{type(exc).__name__}: {exc}"[:800]}
    finally:
        release(engine)


def _profile_variant(ctx: Any, job: ThroughputJob, name: str, step: Callable[[Phase], None]) -> dict[str, Any]:
    """`profiled_step` of one more step when job.profile_dir is set (every rank steps: collectives)."""
    if not job.profile_dir:
        return {}
    try:
        top, table = profiled_step(step)
    except Exception as exc:  # the timed numbers stand without it
        return {"profile_error": f"{type(exc).__name__}: {exc}"[:800]}
    if ctx.rank == 0:
        (Path(job.profile_dir) / f"trainer_profile_{name}.txt").write_text(table)
    return {"profile_top": top}


def zero_record(zero: Any) -> dict[str, Any]:
    """The resolved ZeRO choice (rl.engine.zero_choice.ZeroChoice) as the benchmark JSONs record it."""
    return {"zero_stage_resolved": zero.stage, "zero_stage_reason": zero.reason, "zero_stage_auto": zero.auto,
            "zero_choice_overrides": [list(kv) for kv in zero.overrides]}


def throughput_worker(ctx: Any, job: ThroughputJob) -> dict[str, Any]:
    """Per variant: build the engine, pack this rank's mb x seq tokens, warm up, time `steps` optimizer
    steps of token_logprobs -> selector_grpo_loss -> backward, then one optimizer step (collective);
    then job.phase_steps phase-timed steps and, with job.profile_dir, one profiled step."""
    from skillgate_core.rl.engine import collectives

    start = time.perf_counter()
    results: dict[str, Any] = {}
    for name, ecfg in job.variants:
        # every rank takes rank 0's decision, so the collectives stay matched
        late = collectives.all_gather_objects(bool(job.timeout_s) and time.perf_counter() - start > job.timeout_s)[0]
        results[name] = {"skipped": f"past the {job.timeout_s:.0f} s budget"} if late else _time_variant(ctx, job, name, ecfg)
        if ctx.rank == 0:
            shown = {k: v for k, v in results[name].items() if k != "profile_top"}  # the JSON has it
            print("variant", name, json.dumps(shown, default=str), flush=True)
    return results

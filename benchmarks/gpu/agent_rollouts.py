"""Agent rollouts on the GPU machine: the real harness, the policy's sampler on the GPU, bubblewrap sandboxes.

    python benchmarks/gpu/agent_rollouts.py --bwrap-dir /tmp/bwrap/usr/bin      # the H200 run (docs/gpu.md)
    python benchmarks/gpu/agent_rollouts.py --smoke                              # CPU: tiny model, < 1 min

What runs (all project code; nothing here is a stand-in for the harness):
- the bench: `benchgen.build_suite` (the bench-build stage's code) writes a small suite (16 training
  tasks, one per family x domain, each with its 16-skill slate). Building needs polars and
  rank_bm25 (the slate retriever), which the GPU machine lacks, so there it is built on the CPU
  machine by the same call (`--write-bench FILE.tar.xz`, ~1 MB) and carried (`--bench FILE.tar.xz`);
- the policy model: the init-model stage (`policy.tiny_model.build_tiny_model`) at the anchors'
  360M Qwen2 shape (--hidden/--layers/... as anchor_trl.py) with its ChatML BPE tokenizer, random
  init, or with --model-dir an HF causal LM folder with its tokenizer (on the GPU machine: the
  SmolLM2-135M-Instruct folder init-model wrote, benchmarks/gpu/smollm2.sh STEP=rollouts), loaded in
  bf16 on the GPU; it samples with `policy.static.sampler.StaticSampler` (static KV cache, CUDA-graph
  decode step);
- the episodes: `agent.episode.run_episode_batches` -> `run_episodes` per batch (one batch = one
  task x --repeats, a GRPO group), --lanes batches in flight, the policy shared through
  `SerializedPolicy` (one GPU call at a time; with merge, the default here, the turns that queued
  while the GPU was busy are sampled together in the next call); sandboxes `envs.bwrap_sandbox` (bubblewrap found on
  PATH: --bwrap-dir is put first), tools `agent.tools.ToolBox`, grading `envs.verifier.verify`.

The turn text: a random-init 360M model calls no tools, so its episodes would end after one turn
with nothing for tools or verifiers to do. Each turn therefore costs the GPU what a policy turn
costs (the StaticSampler samples --gen-tokens tokens for every active episode of the batch from its
real context, stop tokens off, so every turn is exactly that long), and the text played into the
sandbox is the reference teacher's (`agent.policies.TeacherPolicy`: read the oracle skill, exec
its procedure, answer), so the tools and verifiers do real work. Trajectories record the teacher's
ids. That is the one departure from a GRPO rollout, and it is said in the JSON.

Timed (wall clock, time.monotonic, intervals recorded by wrapping the harness's own calls):
generation (SerializedPolicy.act), sandbox start (start_sandbox), tools (ToolBox.run_all),
verification (verify), sandbox stop (SandboxGroup.stop). Reported per pass: episodes/min, the share
of the wall clock in which each kind was running (union of intervals), summed seconds, and the
overlap: the share of sandbox work (start + tools + verification + stop) that ran while the GPU was
generating for another batch. A first untimed pass (--warmup-passes) compiles the decode step for
every (batch, cache length) bucket the episodes meet; then --lanes lanes, then 1 lane (no overlap:
lockstep, the harness without lanes, and with EpisodeConfig.overlap_sandbox off, so no sandbox start or
verification of its batch overlaps its turns either) on the same episodes, for the ratio.

--samplers (comma-separated; default "reprefill"): how the GPU samples each turn, one timed pass per
sampler on the same episodes (each after its own untimed warm-up passes), for the ratio between them:
  reprefill  StaticSampler.sample: every turn prefills each episode's whole context (the path before
             the turn cache);
  cached     StaticSampler.sample_turns (policy.static.turn_cache): each episode keeps its KV cache across
             turns and prefills only what its context added, a group's shared prompt prefilled once.
             The context an episode goes on with holds the teacher's turn, not the sampled one, so every
             turn after the first counts a fallback (the sampled tokens it held are dropped): the
             prefill it does is what a policy turn's would be (its turn + the observation);
  reprefill_shared  reprefill with StaticSamplerConfig(shared_prefix=True): the episodes whose contexts are
             equal (a group's first turn) keep the prompt's K/V once and read it once per group per step;
  cached_full  cached with StaticSamplerConfig(live_slots=False): every decode step attends the whole
             cache (the sampler before live slots; its own caches and graphs), for `cached_over_cached_full`;
  hf         transformers `generate` (what TRL's GRPOTrainer calls): a left-padded batch of the whole
             contexts, dynamic KV cache, exactly --gen-tokens per episode (min_new_tokens). It compiles
             nothing, so it gets no warm-up pass. With hf among --samplers the JSON's ratio also holds
             every other sampler over hf (`cached_over_hf`: issue [rollouts] item 1, target 10x).
Each pass reports context_tokens (what a full prefill per turn processes) and, for cached, what the
turn cache prefilled, reused and shared. Each static pass also reports `decode_bytes`: the bytes a
decode token-step reads at least, from the shapes (`ratios.decode_bytes_per_step`: the weights once,
K/V of every row over the slots it attended; and the same had it read the whole cache), and the share
of the card's HBM bandwidth reading them in the pass's generation time means (a lower bound: that time
holds the prefills too).
JSON: --out, else $OUT, else benchmarks/results/gpu/agent_rollouts.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402
import ratios  # noqa: E402

SMOKE = {"hidden": 32, "layers": 2, "heads": 4, "kv": 2, "inter": 64, "vocab": 600, "tasks": 2, "repeats": 2,
         "lanes": 2, "gen_tokens": 8, "warmup_passes": 0, "length_bucket": 256, "corpus_lines": 300,
         "live_bucket": 16}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_bench.add_model_args(p)
    p.set_defaults(vocab=2048)  # the init-model tokenizer's default vocabulary (ChatML specials included)
    p.add_argument("--corpus-lines", type=int, default=4000, help="tokenizer corpus (init-model default)")
    p.add_argument("--tasks", type=int, default=8, help="training tasks of the small suite (at most 16)")
    p.add_argument("--repeats", type=int, default=8, help="episodes per task = one batch (a GRPO group)")
    p.add_argument("--lanes", type=int, default=4, help="batches in flight at once")
    p.add_argument("--extra-lanes", default="", help="comma-separated lane counts timed after --lanes (scaling); "
                   "a trailing u (4u): that pass without merging")
    p.add_argument("--no-merge", action="store_true", help="lanes take turns on the GPU (SerializedPolicy "
                   "merge=False) instead of generating the turns that queued meanwhile together")
    p.add_argument("--workers", type=int, default=8, help="sandbox threads per lane (EpisodeConfig.workers)")
    p.add_argument("--gen-tokens", type=int, default=256, help="tokens the GPU samples per episode per turn")
    p.add_argument("--length-bucket", type=int, default=2048, help="StaticSampler cache-length bucket (few compiles)")
    p.add_argument("--live-bucket", type=int, default=None, help="StaticSamplerConfig.live_bucket: the attended "
                   "length's rounding (default: the config's)")
    p.add_argument("--warmup-passes", type=int, default=1, help="untimed passes first (compiles)")
    p.add_argument("--no-baseline", action="store_true", help="skip the 1-lane pass")
    p.add_argument("--misleading-rate", type=float, default=0.1, help="teacher selection noise (collect default)")
    p.add_argument("--bwrap-dir", default="", help="folder holding the bwrap binary, put first on PATH")
    p.add_argument("--bench", default="", help="a bench built by --write-bench (.tar.xz) or a bench folder; "
                   "default: build it here (needs polars and rank_bm25)")
    p.add_argument("--write-bench", default="", help="only build the small bench into this .tar.xz and exit")
    p.add_argument("--samplers", default="reprefill", help="comma-separated: reprefill, reprefill_shared, cached, cached_full, hf (one timed "
                   "pass each, same episodes; see the module docstring)")
    p.add_argument("--model-dir", default="", help="an HF causal LM folder with its tokenizer to play with "
                   "(e.g. SmolLM2-135M-Instruct as init-model wrote it) instead of the random-init model "
                   "--hidden/--layers/... describe")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="CPU smoke: tiny model, 2 tasks x 2 episodes")
    p.add_argument("--out", default=None, help="output folder (default $OUT, else benchmarks/results/gpu)")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):
        p.set_defaults(**SMOKE)
    return p.parse_args(argv)


class Intervals:
    """(kind, start, end) spans from any thread."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()

    def wrap(self, kind: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.spans.append((kind, start, time.monotonic()))
        return timed

    def of(self, *kinds: str, since: float = 0.0) -> list[tuple[float, float]]:
        return [(a, b) for k, a, b in self.spans if k in kinds and a >= since]


def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def intersect(x: list[tuple[float, float]], y: list[tuple[float, float]]) -> float:
    """Total length of union(x) ∩ union(y)."""
    ux, uy, i, j, total = union(x), union(y), 0, 0, 0.0
    while i < len(ux) and j < len(uy):
        lo, hi = max(ux[i][0], uy[j][0]), min(ux[i][1], uy[j][1])
        total += max(0.0, hi - lo)
        if ux[i][1] < uy[j][1]:
            i += 1
        else:
            j += 1
    return total


SAMPLERS = ("reprefill", "reprefill_shared", "cached", "cached_full", "hf")


class GPUTurnTeacher:
    """Each turn: the GPU samples `gen_tokens` tokens for every view from its real context (the GPU cost of a
    policy turn) by the sampler `mode` names (SAMPLERS), then the reference teacher's turn is played."""

    def __init__(self, model: Any, tokenizer: Any, gen_tokens: int, length_bucket: int, misleading_rate: float,
                 seed: int, live_bucket: int | None = None) -> None:
        from skillgate_core.agent.policies import TeacherConfig, TeacherPolicy
        from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig

        self.teacher = TeacherPolicy(tokenizer, TeacherConfig(misleading_rate=misleading_rate, seed=seed))
        config = StaticSamplerConfig(stop_ids=[], length_bucket=length_bucket, max_cached=16,
                                     **({} if live_bucket is None else {"live_bucket": live_bucket}))
        self.sampler = StaticSampler(model, tokenizer, config)
        # cached_full: the same turn cache attending the whole cache every step (the sampler before live
        # slots); reprefill_shared: sample with a group's shared prompt kept once. Each its own sampler
        # (caches, graphs), made on its first use
        self._configs = {"cached_full": dataclasses.replace(config, live_slots=False),
                         "reprefill_shared": dataclasses.replace(config, shared_prefix=True)}
        self._others: dict[str, Any] = {}
        self.model, self.tokenizer = model, tokenizer
        self.shape = model_shape(model)
        self.decode_steps, self.decode_bytes, self.decode_bytes_whole_cache = 0, 0, 0
        self.gen_tokens, self.seed, self.name = gen_tokens, seed, "gpu-turn-teacher"
        self.calls, self.sampled_tokens, self.context_tokens, self.buckets = 0, 0, 0, Counter()
        self.mode = "reprefill"
        self._held: dict[int, Any] = {}

    def act(self, views: Any) -> list[Any]:
        from skillgate_core.policy.local_sampler import SamplingConfig

        cfg = SamplingConfig(max_new_tokens=self.gen_tokens, seed=self.seed + self.calls, sampler="static")
        self.calls += 1
        contexts = [v.context_ids for v in views]
        self.context_tokens += sum(map(len, contexts))
        if self.mode == "hf":
            self.sampled_tokens += hf_generate(self.model, self.tokenizer, contexts, self.gen_tokens, cfg.seed)
        else:
            sampler = self.active_sampler()
            if self.mode.startswith("cached"):
                ended = [k for k, v in self._held.items() if v.ended]
                sampler.turns.release(ended)
                for k in ended:
                    del self._held[k]
                self._held.update((id(v), v) for v in views)
                sampled = sampler.sample_turns([id(v) for v in views], contexts, cfg, owner=self.name)
            else:
                sampled = sampler.sample(contexts, cfg)
            self.sampled_tokens += sum(len(c.token_ids) for c in sampled)
            stats = sampler.stats
            self.buckets[f"{self.mode}:{stats['batch_bucket']}x{stats['cache_length']}"] += 1
            self.count_decode_bytes(stats, sampler.decoder.attended)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return self.teacher.act(views)


    def active_sampler(self) -> Any:
        """The StaticSampler the mode samples with (cached_full, reprefill_shared: their own, made on first use)."""
        if self.mode not in self._configs:
            return self.sampler
        if self.mode not in self._others:
            from skillgate_core.policy.static import StaticSampler

            self._others[self.mode] = StaticSampler(self.model, self.tokenizer, self._configs[self.mode])
        return self._others[self.mode]

    def count_decode_bytes(self, stats: dict[str, Any], attended: list[int]) -> None:
        """Add what the call's decode steps read at least (ratios.decode_bytes_per_step: the weights once,
        K/V of every row over the slots it attended; a shared prefix once per group) and what reading the
        whole cache, a prompt copy per row, would have been."""
        rows, cache_slots = stats["batch_bucket"], stats["cache_length"]
        shared = stats.get("shared_prefix")
        prefix = 0 if shared is None else ratios.decode_bytes_per_step(
            rows=shared["groups_bucket"], cache_slots=shared["prefix_slots"], **self.shape)["kv_cache"]
        copies = 0 if shared is None else ratios.decode_bytes_per_step(
            rows=stats["batch"], cache_slots=stats["prompt_width"], **self.shape)["kv_cache"]
        for slots in attended:
            self.decode_bytes += ratios.decode_bytes_per_step(rows=rows, cache_slots=slots, **self.shape)["total"] + prefix
            self.decode_bytes_whole_cache += ratios.decode_bytes_per_step(rows=rows, cache_slots=cache_slots,
                                                                          **self.shape)["total"] + copies
        self.decode_steps += len(attended)


def model_shape(model: Any) -> dict[str, int]:
    """The model's sizes `ratios.decode_bytes_per_step` takes besides rows and slots."""
    c = model.config
    heads = c.num_attention_heads
    return {"param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "layers": c.num_hidden_layers, "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
            "head_dim": getattr(c, "head_dim", None) or c.hidden_size // heads,
            "dtype_bytes": next(model.parameters()).element_size()}


def decode_bytes(policy: GPUTurnTeacher, since: tuple[int, int, int], generation_s: float) -> dict[str, Any]:
    """A pass's decode reads from the shapes: bytes per token-step (mean; and had every step read the
    whole cache), and the share of the card's bandwidth (ratios.hbm_bandwidth) that reading them in the
    pass's generation time means: a lower bound on the decode steps' own share, the generation time
    holding the prefills too."""
    steps = policy.decode_steps - since[0]
    read, whole = policy.decode_bytes - since[1], policy.decode_bytes_whole_cache - since[2]
    card = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    return {"decode_steps": steps, "bytes_per_token_step": round(read / max(1, steps)),
            "bytes_per_token_step_whole_cache": round(whole / max(1, steps)),
            "weight_bytes": policy.shape["param_bytes"], "card": card or "cpu",
            "roofline_share_of_generation_time": ratios.roofline_share(read, generation_s, ratios.hbm_bandwidth(card))
            if card else None}


def hf_generate(model: Any, tokenizer: Any, contexts: list[list[int]], new: int, seed: int) -> int:
    """transformers `generate` as TRL calls it (left-padded batch, sampling, dynamic cache), exactly `new`
    tokens per row; returns the tokens sampled."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(map(len, contexts))
    ids = torch.full((len(contexts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for row, c in enumerate(contexts):
        ids[row, width - len(c):], mask[row, width - len(c):] = torch.tensor(c), 1
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), do_sample=True,
                             temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=new, min_new_tokens=new,
                             pad_token_id=pad)
    return int(out[:, width:].numel())


def complete_buckets(policy: GPUTurnTeacher, a: argparse.Namespace) -> list[str]:  # on the policy thread
    """Compile the decode step for every (batch bucket, cache length) that merged turns can meet:
    batch buckets from --repeats up to lanes x repeats, the cache lengths the warm-up pass met.
    Without this, a timed pass that happens to merge turns differently would compile inside it."""
    from skillgate_core.policy.local_sampler import SamplingConfig

    lengths = sorted({int(k.split("x")[1]) for k in policy.buckets if k.startswith("reprefill:")})
    most = max([a.lanes, *(int(x.rstrip("u")) for x in a.extra_lanes.split(",") if x)]) * a.repeats
    batches, b = [], a.repeats
    while True:
        batches.append(1 << max(0, (b - 1).bit_length()))
        if b >= most:
            break
        b *= 2
    done = []
    for batch in sorted(set(batches)):
        for length in lengths:
            if f"reprefill:{batch}x{length}" not in policy.buckets:
                prompt = [policy.sampler.pad_id + 1] * (length - a.gen_tokens - 1)
                policy.sampler.sample([prompt] * batch, SamplingConfig(max_new_tokens=a.gen_tokens, sampler="static"))
                done.append(f"{batch}x{length}")
    return done


def build_bench(bench: Path) -> None:
    """The small suite (tests/support/tiny_fixtures.SMALL_BENCH) by the bench-build stage's code."""
    from skillgate_core.benchgen import BenchBuildConfig, build_suite

    build_suite(BenchBuildConfig(seed=5, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4,
                                 slate_tasks=4), bench)


def build(a: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    """(bench folder, model folder), both by the project's stage code (the bench carried if --bench)."""
    from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

    bench = work / "bench"
    if not a.bench:
        build_bench(bench)
    elif Path(a.bench).is_dir():
        shutil.copytree(a.bench, bench, symlinks=True)  # a link stays a link: the loaders refuse it
    else:
        with tarfile.open(a.bench) as tar:
            tar.extractall(work, filter="data")
    cfg = TinyModelConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.inter,
                          num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv,
                          corpus_lines=a.corpus_lines)
    if a.model_dir:
        return bench, given_model_dir(a.model_dir)
    model_dir = build_tiny_model(cfg, {}, work / "init-model").outputs["base_model"]
    return bench, Path(model_dir)


def given_model_dir(path: str) -> Path:
    """--model-dir, checked: an HF model folder (config.json) with its tokenizer."""
    model_dir = Path(path)
    missing = [name for name in ("config.json", "tokenizer_config.json") if not (model_dir / name).is_file()]
    if missing:
        raise SystemExit(f"--model-dir {path}: expected an HF causal LM folder with its tokenizer, "
                         f"missing {', '.join(missing)}")
    return model_dir


def episode_batches(a: argparse.Namespace, bench: Path, scratch: Path) -> list[list[Any]]:
    from skillgate_core.agent.episode import EpisodeSpec
    from skillgate_core.envs.bench_index import load_bench_rows
    from skillgate_core.envs.task_package import load_task_package
    from skillgate_core.formats.slate_manifest import MANIFEST_FILE
    from skillgate_core.skills import read_slate, slate_skills_dir

    batches = []
    for row in load_bench_rows(bench, "train")[: a.tasks]:
        task = load_task_package(bench / row["path"], within=bench)
        slate = read_slate(bench / row["path"] / MANIFEST_FILE)
        skills = slate_skills_dir(bench / "skills", slate.names, scratch / row["task_id"])
        batches.append([EpisodeSpec(task, slate, skills, bench=row["family"], repeat=r) for r in range(a.repeats)])
    return batches


def run_pass(name: str, a: argparse.Namespace, lanes: int, batches: list[list[Any]], shared: Any, tok: Any,
             spans: Intervals, merge: bool, overlap_sandbox: bool = True) -> dict[str, Any]:
    """One pass over every batch. `shared`: the one SerializedPolicy of the whole run (one policy
    thread, so CUDA graphs recorded in the warm-up are replayed, not recorded again, in later passes)."""
    from skillgate_core.agent.episode import EpisodeConfig, run_episode_batches
    from skillgate_core.envs.sandbox_config import SandboxConfig

    policy = shared.policy
    shared.merge = merge
    config = EpisodeConfig(max_turns=6, backend="bwrap", workers=a.workers, max_new_tokens=max(a.gen_tokens, 256),
                           overlap_sandbox=overlap_sandbox)
    tokens0, calls0, context0 = policy.sampled_tokens, policy.calls, policy.context_tokens
    cache0 = dict(policy.active_sampler().turns.counters)
    bytes0 = (policy.decode_steps, policy.decode_bytes, policy.decode_bytes_whole_cache)
    t0 = time.monotonic()
    results = run_episode_batches(batches, shared, tok, config, sandbox_config=SandboxConfig(backend="bwrap"),
                                  lanes=lanes)
    wall = time.monotonic() - t0
    trajs = [t for batch in results for t in batch]
    gen = [(s, e) for s, e in shared.busy if s >= t0]
    sizes = [n for (s, _), n in zip(shared.busy, shared.call_sizes, strict=True) if s >= t0]
    sandbox = spans.of("start", "tools", "verify", "stop", since=t0)
    kinds = {k: spans.of(k, since=t0) for k in ("start", "tools", "verify", "stop")}
    gen_union, box_union = length(union(gen)), length(union(sandbox))
    out = {
        "pass": name, "sampler": policy.mode, "lanes": lanes, "overlap_sandbox": overlap_sandbox,
        "episodes": len(trajs), "batches": len(batches), "wall_s": round(wall, 2),
        "episodes_per_min": round(60 * len(trajs) / wall, 1),
        "statuses": dict(Counter(t.status for t in trajs)), "resolved": sum(t.score >= 1.0 for t in trajs),
        "backends": dict(Counter(t.backend for t in trajs)),
        "turns": sum(len(t.turns) for t in trajs), "policy_calls": policy.calls - calls0,
        "merged": merge, "rows_per_call_mean": round(sum(sizes) / max(1, len(sizes)), 1),
        "rows_per_call_max": max(sizes, default=0),
        "gpu_sampled_tokens": policy.sampled_tokens - tokens0,
        "context_tokens": policy.context_tokens - context0,
        "turn_cache": {k: v - cache0.get(k, 0) for k, v in policy.active_sampler().turns.counters.items()},
        # which decode step sampled (the sampler's defaults differ by device and model)
        "decode_step": "transformers generate" if policy.mode == "hf" else policy.active_sampler().decode_stats() | {
            "block_decode": policy.active_sampler().block_decode, "compiled": policy.active_sampler().compiled,
            "live_slots": policy.active_sampler().config.live_slots},
        "decode_bytes": None if policy.mode == "hf" else decode_bytes(policy, bytes0, gen_union),
        "gpu_tok_per_s_while_generating": round((policy.sampled_tokens - tokens0) / max(1e-9, gen_union), 1),
        "share_of_wall": {"generation": round(gen_union / wall, 3),
                          **{k: round(length(union(v)) / wall, 3) for k, v in kinds.items()},
                          "sandbox_work": round(box_union / wall, 3),
                          "idle": round(1 - length(union(gen + sandbox)) / wall, 3)},
        "summed_s": {"generation": round(length(gen), 2), **{k: round(length(v), 2) for k, v in kinds.items()}},
        "calls": {k: len(v) for k, v in kinds.items()},
        "overlap": {
            "sandbox_work_while_generating_s": round(intersect(sandbox, gen), 2),
            "share_of_sandbox_work_overlapping_generation": round(intersect(sandbox, gen) / max(1e-9, box_union), 3),
            "share_of_generation_overlapped_by_sandbox_work": round(intersect(sandbox, gen) / max(1e-9, gen_union), 3),
            "episodes_in_flight_mean": round(sum(t.duration_s for t in trajs) / wall, 2),
        },
        "mean_episode_s": round(sum(t.duration_s for t in trajs) / max(1, len(trajs)), 2),
    }
    print("pass", json.dumps(out), flush=True)
    return out


def _sampler_summary(p: dict[str, Any]) -> dict[str, Any]:
    """What the sampler comparison reads of one timed pass."""
    return {"pass": p["pass"], "episodes_per_min": p["episodes_per_min"], "generation_s": p["summed_s"]["generation"],
            "gpu_tok_per_s_while_generating": p["gpu_tok_per_s_while_generating"],
            "gpu_sampled_tokens": p["gpu_sampled_tokens"], "context_tokens": p["context_tokens"],
            "turn_cache": p["turn_cache"], "decode_bytes": p["decode_bytes"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = parse(argv)
    if a.write_bench:
        with tempfile.TemporaryDirectory() as tmp:
            build_bench(Path(tmp) / "bench")
            with tarfile.open(a.write_bench, "w:xz") as tar:
                tar.add(Path(tmp) / "bench", arcname="bench")
        print(f"wrote {a.write_bench} ({Path(a.write_bench).stat().st_size} bytes)")
        return {}
    out, work, path, result = gpu_bench.start_run("agent_rollouts", a, argv)
    if a.bwrap_dir:
        os.environ["PATH"] = f"{a.bwrap_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    from skillgate_core.agent import episode, tools
    from skillgate_core.envs import bwrap_sandbox, sandbox_group

    result["bwrap"] = {"path": shutil.which("bwrap"), "unavailable_reason": bwrap_sandbox.unavailable_reason()}
    print("bwrap", json.dumps(result["bwrap"]), flush=True)
    gpu_bench.write_json(path, result)
    if result["bwrap"]["unavailable_reason"]:
        result["error"] = "bubblewrap cannot run here: " + result["bwrap"]["unavailable_reason"]
        gpu_bench.write_json(path, result)
        return result

    t0 = time.perf_counter()
    bench, model_dir = build(a, work)
    result["build_s"] = round(time.perf_counter() - t0, 1)
    cuda = torch.cuda.is_available()
    from skillgate_core.policy.local_sampler import load_policy

    model, tok = load_policy(model_dir, dtype=torch.bfloat16 if cuda else torch.float32,
                             device="cuda" if cuda else "cpu")
    result["model"] = {"dir": a.model_dir or "random init (--hidden/--layers/...)",
                       "architecture": type(model).__name__,
                       "params_M": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
                       "vocab": len(tok), "dtype": str(model.dtype), "device": str(model.device)}
    policy = GPUTurnTeacher(model, tok, a.gen_tokens, a.length_bucket, a.misleading_rate, a.seed, a.live_bucket)
    batches = episode_batches(a, bench, work / "skills")
    from skillgate_core.agent.prompts import DEFAULT_PROFILE, build_messages, render_prompt_ids

    widths = [len(render_prompt_ids(tok, build_messages(DEFAULT_PROFILE, b[0].task.instruction, b[0].slate)))
              for b in batches]
    result["workload"] = {"tasks": len(batches), "episodes_per_pass": sum(map(len, batches)),
                          "prompt_tokens_min_max": [min(widths), max(widths)]}
    from skillgate_core.agent.episode import SerializedPolicy

    shared = SerializedPolicy(policy, merge=not a.no_merge)
    spans = Intervals()
    episode.start_sandbox = spans.wrap("start", episode.start_sandbox)
    episode.verify = spans.wrap("verify", episode.verify)
    tools.ToolBox.run_all = spans.wrap("tools", tools.ToolBox.run_all)
    sandbox_group.SandboxGroup.stop = spans.wrap("stop", sandbox_group.SandboxGroup.stop)

    samplers = [m for m in a.samplers.split(",") if m]
    unknown = sorted(set(samplers) - set(SAMPLERS))
    if unknown or not samplers:
        raise SystemExit(f"--samplers: expected a comma-separated subset of {', '.join(SAMPLERS)}, got {a.samplers!r}")
    if {"cached", "cached_full"} & set(samplers) and not policy.sampler.turns.supported:
        raise SystemExit("--samplers cached: this transformers' StaticCache cannot be written at a chosen slot "
                         "(policy.static.turn_cache.TurnCache.supported)")
    policy.mode = samplers[0]
    passes = []
    for i in range(a.warmup_passes):
        t1 = time.perf_counter()
        warm = run_pass(f"warmup{i}", a, a.lanes, batches, shared, tok, spans, not a.no_merge)
        warm["note"] = "untimed: compiles the decode step for each (batch, cache length) bucket"
        warm["compile_and_run_s"] = round(time.perf_counter() - t1, 1)
        passes.append(warm)
        result["passes"] = passes
        gpu_bench.write_json(path, result)
    if torch.cuda.is_available() and a.warmup_passes:
        t1 = time.perf_counter()
        result["completed_buckets"] = shared.run(lambda: complete_buckets(policy, a))
        result["complete_buckets_s"] = round(time.perf_counter() - t1, 1)
        print("completed buckets", result["completed_buckets"], result["complete_buckets_s"], flush=True)
    passes.append(run_pass("lanes", a, a.lanes, batches, shared, tok, spans, not a.no_merge))
    result["passes"] = passes
    gpu_bench.write_json(path, result)
    for entry in (x for x in a.extra_lanes.split(",") if x):
        unmerged = entry.endswith("u")
        passes.append(run_pass(f"lanes{entry}", a, int(entry.rstrip("u")), batches, shared, tok, spans,
                               not a.no_merge and not unmerged))
        gpu_bench.write_json(path, result)
    if not a.no_baseline and a.lanes > 1:
        passes.append(run_pass("one_lane", a, 1, batches, shared, tok, spans, False, overlap_sandbox=False))
        lanes_pass, one = next(p for p in passes if p["pass"] == "lanes"), passes[-1]
        result["ratio"] = {"episodes_per_min_lanes_over_one_lane": round(lanes_pass["episodes_per_min"]
                                                                         / max(1e-9, one["episodes_per_min"]), 2)}
    result["samplers"] = {samplers[0]: _sampler_summary(next(p for p in passes if p["pass"] == "lanes"))}
    for mode in samplers[1:]:  # the same episodes, each sampler after its own warm-up (compiles)
        policy.mode = mode
        for i in range(a.warmup_passes if mode != "hf" else 0):  # generate compiles nothing
            warm = run_pass(f"warmup{i}_{mode}", a, a.lanes, batches, shared, tok, spans, not a.no_merge)
            warm["note"] = "untimed: compiles"
            passes.append(warm)
            result["passes"] = passes
            gpu_bench.write_json(path, result)  # a run cut off by its budget keeps every pass it finished
        passes.append(run_pass(f"sampler_{mode}", a, a.lanes, batches, shared, tok, spans, not a.no_merge))
        result["samplers"][mode] = _sampler_summary(passes[-1])
        result["passes"] = passes
        gpu_bench.write_json(path, result)
    if "reprefill" in result["samplers"] and len(samplers) > 1:
        base = result["samplers"]["reprefill"]
        result["ratio"] = {**result.get("ratio", {}), **{
            f"{mode}_over_reprefill": {"episodes_per_min": round(r["episodes_per_min"] / max(1e-9, base["episodes_per_min"]), 2),
                                       "generation_s": round(r["generation_s"] / max(1e-9, base["generation_s"]), 3)}
            for mode, r in result["samplers"].items() if mode != "reprefill"}}
    if "hf" in result["samplers"] and len(samplers) > 1:  # the anchor of issue [rollouts] item 1
        hf = result["samplers"]["hf"]
        result["ratio"] = {**result.get("ratio", {}), **{
            f"{mode}_over_hf": {"episodes_per_min": round(r["episodes_per_min"] / max(1e-9, hf["episodes_per_min"]), 2),
                                "generation_s": round(r["generation_s"] / max(1e-9, hf["generation_s"]), 3)}
            for mode, r in result["samplers"].items() if mode != "hf"}}
    if {"cached", "cached_full"} <= set(result["samplers"]):  # live slots against the whole cache: [speed] 3
        new, old = result["samplers"]["cached"], result["samplers"]["cached_full"]
        result["ratio"] = {**result.get("ratio", {}), "cached_over_cached_full": {
            "episodes_per_min": round(new["episodes_per_min"] / max(1e-9, old["episodes_per_min"]), 2),
            "generation_s": round(new["generation_s"] / max(1e-9, old["generation_s"]), 3)}}
    shared.close()
    result["sampler_buckets"] = dict(policy.buckets)
    result["turn_text"] = ("reference teacher (read oracle skill / exec its procedure / answer); the GPU samples "
                           f"{a.gen_tokens} tokens per active episode per turn from the real context (stop off)")
    result["passes"] = passes
    gpu_bench.write_json(path, result)
    timed = next(p for p in passes if p["pass"] == "lanes")
    print("SUMMARY agent_rollouts", json.dumps({
        "episodes_per_min": timed["episodes_per_min"], "share_of_wall": timed["share_of_wall"],
        "overlap": timed["overlap"], "ratio": result.get("ratio"), "samplers": result["samplers"],
        "json": str(path)}), flush=True)
    return result


if __name__ == "__main__":
    main()

"""GRPO with the SkillGate selector credit: the per-worker training loop, top to bottom.

Each Ray Train worker (or the single process of a debugging run) runs `grpo_worker(job)`:

    for step in steps:
        1. rollouts   the replica (or the noisy teacher) plays G episodes per drawn prompt in real
                      sandboxes; every group is span-checked and filtered, rejects are refilled
        2. credit     advantages per profile, token weights per conversion chunk (docs/method.md 5-7)
        3. N          the loss normaliser, summed over every episode of every rank (docs/method.md 6)
        4. pack       samples -> micro-batches under a token budget; every rank runs the same count
        5. old/ref    log-probs recomputed by the engine (and the frozen reference), no grad
        6. update     loss + backward per micro-batch, ONE optimizer step
        7. sync       the replica (or the SGLang servers) takes the (gathered) weights
        8. record     metrics (rank 0 writes metrics.jsonl and ticks the progress), checkpoint every K steps

Helpers live in their own modules: rollouts (step 1), samples (2), loss (6), sglang_sync (1 and 7 in
server mode), step_metrics, progress and heldin_probe (8); the machinery of 3-7 is the engine room
(rl/engine/: packing, log-probs, the DeepSpeed engine, collectives). Nothing here
touches Prefect or the warehouse: the stage (grpo_stage) records what rank 0 returns.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from skillgate_core.agent.policies import LocalPolicy, TeacherConfig, TeacherPolicy
from skillgate_core.ownership import build_export, save_checkpoint
from skillgate_core.ownership.layout import METRICS_FILE
from skillgate_core.policy.local_sampler import SamplingConfig
from skillgate_core.rl.engine import (  # the engine room: DeepSpeed, packing, log-probs, collectives, launch
    EngineConfig,
    MicroBatch,
    PackingConfig,
    StepStats,
    WorkerContext,
    ZeroChoice,
    backward,
    build_engine,
    build_reference,
    collectives,
    gathered_state_dict,
    has_active_dropout,
    load_engine_checkpoint,
    load_replica,
    optimizer_step,
    pack_samples,
    packs_varlen,
    pad_micro_batches,
    refresh_replica,
    resolve_zero,
    resumed_zero,
    save_engine_checkpoint,
    token_logprobs,
)
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.heldin_probe import heldin_sample, probe_replica
from skillgate_core.rl.loss import LossOutput, global_token_normaliser, selector_grpo_loss
from skillgate_core.rl.profiles import get_profile
from skillgate_core.rl.progress import ProgressStyle, step_progress
from skillgate_core.rl.prompt_stream import PromptStream
from skillgate_core.rl.rl_tasks import load_rl_tasks
from skillgate_core.rl.rollouts import rollout_step, step_filter_for
from skillgate_core.rl.samples import TOKEN_FIELDS, CreditedSample, build_samples
from skillgate_core.rl.sglang_sync import ServerRollouts
from skillgate_core.rl.step_metrics import StepTimer, rank_summary, step_metrics

__all__ = ["GRPOJob", "TRAINER_STATE_FILE", "export_id_for", "grpo_worker", "update_policy"]

TRAINER_STATE_FILE = "trainer_state.json"
"""Inside every checkpoint: the step and each rank's prompt-stream cursor."""
CREDIT_EPISODES_FILE = "credit_episodes.jsonl"
"""In the segment: one row per trained episode (token counts of each credit stream), for the paper's
credit-starvation figure."""
ENGINE_DIR, ENGINE_TAG = "engine", "state"
"""Inside every checkpoint: DeepSpeed's own sharded save (model, optimizer), one file set per rank."""


@dataclass(frozen=True)
class GRPOJob:
    """Everything a worker needs, as plain paths and values (it crosses the Ray boundary)."""

    config: GRPOConfig
    """The stage config."""
    model_dir: str
    """The initial policy (HF model dir): the SFT model."""
    rl_data: str
    """The rl-data-prep output folder."""
    bench: str
    """The bench folder (task packages, skill library)."""
    experiments_root: str
    """SKILLGATE_HOME/experiments: checkpoints are published into the owning experiment (docs/method.md 10)."""
    experiment_id: str
    """The experiment this run belongs to."""
    run_name: str
    """This segment (process lifetime)."""
    segment_dir: str
    """This segment's folder: metrics.jsonl lives there."""
    resume_checkpoint: str = ""
    """A checked checkpoint to resume from ('' for a fresh start)."""
    start_step: int = 0
    """Steps already done by earlier segments (0 for a fresh start)."""
    scratch_dir: str = ""
    """A folder for per-rank scratch (slate skill folders)."""
    progress: ProgressStyle = "lines"
    """How rank 0 shows progress: a bar (the driver watches a terminal) or a line per step."""
    sglang_urls: tuple[str, ...] = ()
    """rollout_source = sglang: the servers, as the driver's worker lists them (SKILLGATE_SGLANG_URLS)."""


@dataclass
class _State:
    step: int = 0
    cursors: list[int] = field(default_factory=list)
    optimizer_steps: int = 0
    """Optimizer steps taken so far (a step whose groups were all rejected takes none)."""


def _sampling_seed(seed: int, step: int, rank: int) -> int:
    # A function of (seed, step, rank) only, so a resumed run samples exactly as an uninterrupted one.
    return int(hashlib.sha256(f"grpo-sampling::{seed}::{step}::{rank}".encode()).hexdigest()[:8], 16)


def _policy(job: GRPOJob, replica: Any, servers: ServerRollouts | None, tokenizer: Any, step: int, rank: int,
            static_sampler: Any = None) -> Any:
    cfg = job.config
    if cfg.rollout_source == "teacher":
        noise = TeacherConfig(cfg.teacher_misleading_rate, cfg.teacher_no_read_rate,
                              seed=_sampling_seed(cfg.seed, step, rank))
        return TeacherPolicy(tokenizer, noise, name="teacher")
    sampling = SamplingConfig(temperature=cfg.temperature, top_p=1.0, max_new_tokens=cfg.max_new_tokens,
                              seed=_sampling_seed(cfg.seed, step, rank), sampler=cfg.sampler)
    if servers is not None:
        return servers.policy(sampling, name="policy")
    return LocalPolicy(replica, tokenizer, sampling, name="policy", static_sampler=static_sampler)


def _servers(job: GRPOJob, tokenizer: Any) -> ServerRollouts | None:
    """Server mode: this rank's client of the SGLang servers (every rank checks they answer)."""
    cfg = job.config
    if cfg.rollout_source != "sglang":
        return None
    # always under the run's own segment: the folder rank 0 writes (and prunes) is not a run parameter
    weights_dir = Path(job.segment_dir) / "sglang-weights"
    servers = ServerRollouts(cfg, tokenizer, urls=job.sglang_urls, model_dir=job.model_dir, weights_dir=weights_dir)
    servers.check_health()
    return servers


def _loss(logp: torch.Tensor, old: torch.Tensor, ref: torch.Tensor | None, mb: MicroBatch, normaliser: float,
          cfg: GRPOConfig) -> LossOutput:
    # Every profile trains through the two-stream loss: the plain ones carry w_task = mask and w_sel = 0
    # (rl/samples.py), where it equals grpo_clipped_loss (tests/rl/test_rl_loss.py).
    f = mb.fields
    return selector_grpo_loss(logp, old, f["a_task"], f["a_sel"], f["w_task"], f["w_sel"], f["mask"], normaliser,
                              selector_coef=cfg.lambda_, logp_ref=ref, beta=cfg.beta, clip_low=cfg.clip_low,
                              clip_high=cfg.clip_high)


def update_policy(engine: Any, reference: Any, samples: list[CreditedSample], cfg: GRPOConfig,
                  *, pad_token_id: int, device: torch.device,
                  timer: StepTimer | None = None) -> tuple[float, list[Any], StepStats | None]:
    """One optimizer step on this rank's samples (collective). Returns (N, per-micro-batch loss parts,
    what the optimizer step reported: gradient norm before clipping and learning rate; None when no
    step was taken).

    timer: if given, the step is split into its phases "logprob" (normaliser, packing, old and
    reference log-probs) and "train" (forward, backward, optimizer step).

    N sums every episode of every rank (docs/method.md 6). Every rank runs the same number of micro-batches
    (ZeRO-3 gathers parameters collectively on each forward), padding with empty ones. The old and
    reference log-probs come from the same code that computes the new ones, before any update, so at this
    step rho = 1 exactly; the old ones are the new ones detached unless cfg.old_logprobs says recompute or
    the policy has active dropout. A step with no loss token anywhere (every group
    rejected) takes no optimizer step.
    """
    phase = timer.phase if timer is not None else (lambda name: contextlib.nullcontext())
    with phase("logprob"):
        # 3. the global normaliser N
        normaliser = collectives.all_reduce_sum(global_token_normaliser([s.mask for s in samples]))
        if normaliser <= 0:
            return 0.0, [], None
        # 4. pack, and agree on the micro-batch count
        longest = max((len(s.prompt_ids) + len(s.response_ids) for s in samples), default=0)
        packing = PackingConfig(max_tokens=max(cfg.micro_batch_tokens, longest), pad_token_id=pad_token_id,
                                max_samples=0 if packs_varlen(engine) else 1)
        packed = pack_samples(samples, packing)
        count = collectives.all_reduce_max(len(packed))
        micro_batches = [mb.to(device) for mb in pad_micro_batches(packed, count, field_names=TOKEN_FIELDS)]
        # 5. old and reference log-probs, before any update. With ONE optimizer step after every backward the
        # policy at each loss is the one that sampled, so the old log-probs are the new ones detached (rho = 1),
        # unless dropout makes two forwards differ (cfg.old_logprobs)
        recompute = cfg.old_logprobs == "recompute" or has_active_dropout(engine)
        with torch.no_grad():
            old = [token_logprobs(engine, mb, cfg.temperature) if recompute else None for mb in micro_batches]
            ref = [token_logprobs(reference, mb, cfg.temperature) if reference is not None else None
                   for mb in micro_batches]
    with phase("train"):
        # 6. loss and backward per micro-batch, then ONE optimizer step
        losses = []
        for k, mb in enumerate(micro_batches):
            logp = token_logprobs(engine, mb, cfg.temperature)
            old_k = old[k]
            out = _loss(logp, logp.detach() if old_k is None else old_k, ref[k], mb, normaliser, cfg)
            backward(engine, out.loss)
            if mb.num_response_tokens:
                losses.append(out)
        stats = optimizer_step(engine)
    return normaliser, losses, stats


def _static_sampler(replica: Any, tokenizer: Any, cfg: GRPOConfig, world: int) -> Any:
    """The replica's one StaticSampler, kept for the whole run and handed to every step's LocalPolicy (its
    caches and compiled decode graphs are what make it fast); None when the replica samples with hf.

    cfg.static_shapes: it pads every call to this worker's largest round (its groups x draw_ahead, rounded
    up, x G episodes, 2G for a paired slate) and a cache of max_context_tokens + max_new_tokens, so the rollouts compile one
    decode graph. The cache holds the widest context of the batch plus the LONGEST turn budget of the
    batch (each episode keeps its own budget and rows are cut afterwards: agent.policies.LocalPolicy),
    so it can exceed max_context_tokens by up to max_new_tokens."""
    from skillgate_core.policy.static import StaticSampler, StaticSamplerConfig, resolve_sampler

    if resolve_sampler(SamplingConfig(sampler=cfg.sampler), replica) != "static":
        return None
    if not cfg.static_shapes:
        return StaticSampler(replica, tokenizer)
    per_group = cfg.group_size * (2 if get_profile(cfg.profile).slate == "paired" else 1)
    largest_round = math.ceil(max(1, cfg.prompts_per_step // world) * cfg.draw_ahead)  # rollouts.rollout_step
    return StaticSampler(replica, tokenizer, StaticSamplerConfig(min_batch=largest_round * per_group,
                         min_cache_length=cfg.max_context_tokens + cfg.max_new_tokens))


def grpo_worker(ctx: WorkerContext, job: GRPOJob) -> dict[str, Any]:
    """Train (collective: every rank runs it); returns this rank's summary (rank 0's is the run's)."""
    from transformers import AutoTokenizer

    cfg, profile = job.config, get_profile(job.config.profile)
    rank, world = collectives.rank(), collectives.world_size()
    device = torch.device(f"cuda:{torch.cuda.current_device()}") if cfg.use_gpu else torch.device("cpu")
    tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
    engine_config = EngineConfig(
        lr=cfg.learning_rate, weight_decay=cfg.weight_decay, betas=(cfg.adam_beta1, cfg.adam_beta2),
        grad_clip=cfg.grad_clip, zero_stage=cfg.zero_stage, dtype="bf16" if cfg.bf16 else "fp32",
        # one rank holds every shard anyway: a plain copy spares each reference forward ZeRO-3's gather hooks
        reference_sharded=world > 1, lora_rank=cfg.lora_rank, lora_alpha=cfg.lora_alpha,
    )
    zero = _run_zero(job, engine_config)
    if rank == 0:
        print(f"grpo {job.experiment_id}: policy engine ZeRO {zero.reason}", file=sys.stderr, flush=True)
    engine = build_engine(job.model_dir, engine_config, zero=zero)
    reference = build_reference(job.model_dir, engine_config, beta=cfg.beta)
    replica = load_replica(job.model_dir, engine_config) if cfg.rollout_source == "policy" else None
    static_sampler = _static_sampler(replica, tokenizer, cfg, world) if replica is not None else None

    state = _State(step=job.start_step, cursors=[0] * world)
    if job.resume_checkpoint:
        saved = json.loads((Path(job.resume_checkpoint) / TRAINER_STATE_FILE).read_text())
        written_rank = saved.get("config", {}).get("lora_rank", 0)  # a checkpoint from before LoRA trained every weight
        if written_rank != cfg.lora_rank:  # checked first: the engine files of the two differ (adapters or all)
            raise ValueError(f"checkpoint {job.resume_checkpoint} was written with grpo.lora_rank = {written_rank}, "
                             f"this run has {cfg.lora_rank}: resume with the same lora_rank")
        # weights-only unpickling: the folder lies in the state dir, where a planted file would run code
        load_engine_checkpoint(engine, Path(job.resume_checkpoint) / ENGINE_DIR, ENGINE_TAG)
        if saved["world_size"] != world:
            raise ValueError(f"checkpoint {job.resume_checkpoint} was written by {saved['world_size']} workers, "
                             f"this run has {world}: the prompt order would change; resume with the same num_workers")
        # a checkpoint from before optimizer_steps was kept: assume every step took one (as it then claimed)
        state = _State(step=int(saved["step"]), cursors=list(saved["cursors"]),
                       optimizer_steps=int(saved.get("optimizer_steps", saved["step"])))
        if replica is not None:
            refresh_replica(replica, engine)
    servers = _servers(job, tokenizer)
    if servers is not None:  # the servers start from exactly the engine's weights, fresh or resumed
        servers.push(engine, steps_done=state.step)

    scratch = Path(job.scratch_dir or job.segment_dir) / f"rank{rank}"
    tasks = load_rl_tasks(Path(job.rl_data), Path(job.bench), scratch, policy_dir=Path(job.model_dir))
    stream = PromptStream(len(tasks), cfg.seed, rank, world, cursor=state.cursors[rank])
    per_worker = cfg.prompts_per_step // world
    metrics_path = Path(job.segment_dir) / METRICS_FILE
    summary: dict[str, Any] = {"steps": [], "checkpoints": [], "zero_stage_resolved": zero.stage,
                               "zero_stage_reason": zero.reason}
    progress = step_progress(total=cfg.steps, initial=state.step, desc=f"grpo {job.experiment_id}",
                             style=job.progress, under_ray=bool(getattr(ctx, "under_ray", False)), enabled=rank == 0)
    probe_rows = (heldin_sample(job.rl_data, cfg.seed, cfg.probe_tasks)
                  if rank == 0 and replica is not None and cfg.probe_every else [])
    # the curve's first point: the starting policy, before any update (reported in step 0's row)
    start_probe = {k.replace("probe/", "probe/start_"): v for k, v in probe_replica(replica, tokenizer, probe_rows).items()
                   } if probe_rows and state.step == 0 else {}

    for step in range(state.step, cfg.steps):
        timer = StepTimer()
        # 1. rollouts: this worker's share of groups, filtered and refilled
        step_filter = step_filter_for(profile, cfg)
        with timer.phase("rollout"):
            groups, rollout = rollout_step(tasks, stream, _policy(job, replica, servers, tokenizer, step, rank, static_sampler),
                                           tokenizer, profile, cfg, step_filter, target_groups=per_worker)
        # 2. credit
        samples, facts = build_samples(groups, profile, chunk_groups=cfg.chunk_groups)
        # 3-6. normaliser, packing, old/ref log-probs, one optimizer step
        with timer.phase("train"):
            normaliser, losses, update = update_policy(engine, reference, samples, cfg,
                                                       pad_token_id=tokenizer.pad_token_id or 0, device=device)
        state.optimizer_steps += update is not None
        # 7. the replica or the servers take the new weights (every rank enters the gather)
        with timer.phase("sync"):
            if replica is not None and normaliser > 0:
                refresh_replica(replica, engine)
            if servers is not None and normaliser > 0:
                servers.push(engine, steps_done=step + 1)  # rank 0 writes + calls the servers; then a barrier
        # 8. metrics and checkpoints
        mine = rank_summary(groups=groups, rollout=rollout, facts=facts, filter_counts=step_filter.counts(),
                            losses=losses, timer=timer.seconds)
        summaries = collectives.all_gather_objects(mine)
        row = step_metrics(step=step, summaries=summaries, normaliser=normaliser, profile=profile, update=update,
                           selector_coef=cfg.lambda_, variant=cfg.variant)
        row["optimizer_steps"] = state.optimizer_steps  # taken so far in the experiment, resumed segments included
        if step == 0:
            row.update(start_probe)
        if probe_rows and (step + 1) % cfg.probe_every == 0:
            row.update(probe_replica(replica, tokenizer, probe_rows))
        if rank == 0:
            with metrics_path.open("a") as fh:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
            with (Path(job.segment_dir) / CREDIT_EPISODES_FILE).open("a") as fh:
                for s in summaries:
                    for record in s["credit_episodes"]:
                        fh.write(json.dumps({"step": step, "profile": profile.name, **record}, sort_keys=True) + "\n")
            summary["steps"].append(row)
            progress.step(row)
        done = step + 1
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            cursors = collectives.all_gather_objects(stream.cursor)
            path = _checkpoint(engine, job, done, cursors, state.optimizer_steps)
            summary["checkpoints"].append({"step": done, "path": path})
    progress.close()
    if servers is not None:
        servers.close()
    summary["last_step"] = cfg.steps
    summary["optimizer_steps"] = state.optimizer_steps
    summary["export"] = _export(engine, job, cfg.steps, tokenizer)
    return summary


def _run_zero(job: GRPOJob, engine_config: EngineConfig) -> ZeroChoice:
    """The run's ZeRO stage (collective): resolve_zero's, except that a resumed "auto" run keeps the stage
    its checkpoint was written with, since DeepSpeed's checkpoint files differ by stage (a checkpoint from
    before "auto" existed names it in its saved config)."""
    zero = resolve_zero(job.model_dir, engine_config)
    if not job.resume_checkpoint:
        return zero
    saved = json.loads((Path(job.resume_checkpoint) / TRAINER_STATE_FILE).read_text())
    return resumed_zero(zero, saved.get("zero_stage", saved.get("config", {}).get("zero_stage")))


def export_id_for(step: int) -> str:
    """The id of the export taken at `step` (unique within an experiment)."""
    return f"step-{step:08d}"


def _export(engine: Any, job: GRPOJob, step: int, tokenizer: Any) -> dict[str, Any]:
    """The trained policy as a plain HF model dir, published through the atomic export (rank 0)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    state = gathered_state_dict(engine)  # collective: every rank enters the gather
    record: dict[str, Any] = {}
    if collectives.rank() == 0:
        def write(tmp: Path) -> None:
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(job.model_dir))
            model.to(next(iter(state.values())).dtype)
            missing, unexpected = model.load_state_dict(state, strict=False)
            model.tie_weights()  # a tied lm_head is not a separate parameter: the gather omits it
            tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
            if unexpected or set(missing) - tied:
                raise RuntimeError(f"export: gathered weights do not fit {job.model_dir}: missing "
                                   f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]}")
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)

        lineage = {"init_model": job.model_dir, "rl_data": job.rl_data, "bench": job.bench,
                   "profile": job.config.profile, "variant": job.config.variant, "config": asdict(job.config)}
        rec = build_export(Path(job.experiments_root), job.experiment_id, export_id_for(step), run_name=job.run_name,
                           step=step, write=write, lineage=lineage)
        record = {"export_id": rec.export_id, "path": rec.path, "weights_sha256": rec.weights_sha256, "step": step}
    collectives.barrier()
    return record


def _checkpoint(engine: Any, job: GRPOJob, step: int, cursors: list[int], optimizer_steps: int) -> str:
    """Publish checkpoint `step` of this segment atomically: rank 0 opens a temp folder in the
    experiment (ownership.save_checkpoint), every rank writes its shard into it, rank 0 adds the
    trainer state; the folder is renamed into place only once all of that is on disk."""
    if collectives.rank() != 0:
        (folder,) = [p for p in collectives.all_gather_objects(None) if p is not None]
        save_engine_checkpoint(engine, Path(folder) / ENGINE_DIR, ENGINE_TAG)
        collectives.barrier()
        return str(folder)

    def write(tmp: Path) -> None:
        collectives.all_gather_objects(str(tmp))
        save_engine_checkpoint(engine, tmp / ENGINE_DIR, ENGINE_TAG)
        collectives.barrier()
        state = {"step": step, "cursors": cursors, "world_size": collectives.world_size(),
                 "optimizer_steps": optimizer_steps, "zero_stage": int(engine.zero_optimization_stage()),
                 "config": asdict(job.config), "written_at": time.time()}
        (tmp / TRAINER_STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")

    ref = save_checkpoint(Path(job.experiments_root), job.experiment_id, job.run_name, step, write)
    return ref.path

"""Per-worker functions the launch tests run (an importable module: Ray workers import it by name).

`grpo_step_worker` is one real GRPO optimizer step on a ZeRO-3 engine: this rank's share of the
samples is packed, old / reference log-probs are computed, the two-stream selector loss (global N
all-reduced) is backpropagated micro-batch by micro-batch, one AdamW step is taken, and the
replica is refreshed from the gathered weights.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

import torch

from skillgate_core.rl.engine.collectives import all_reduce_max, all_reduce_sum
from skillgate_core.rl.engine.deepspeed_engine import (  # names, not logic: one imported name a line
    EngineConfig,
    backward,
    build_engine,
    build_reference,
    gathered_state_dict,
    load_replica,
    optimizer_step,
    refresh_replica,
    resolve_zero,
)
from skillgate_core.rl.engine.launch import WorkerContext
from skillgate_core.rl.engine.logprobs import token_logprobs
from skillgate_core.rl.engine.packing import PackingConfig, TrainSample, pack_samples, pad_micro_batches
from skillgate_core.rl.loss import global_token_normaliser, selector_grpo_loss

FIELDS = ("a_sel", "a_task", "mask", "noise", "w_sel", "w_task")


@dataclass(frozen=True)
class StepCase:
    """One GRPO step to run on every rank."""

    model_dir: str
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(lr=1e-3, grad_clip=1.0, zero_stage=3))
    num_samples: int = 6
    max_tokens: int = 64
    beta: float = 0.05
    selector_coef: float = 0.2
    seed: int = 0


def hand_made_samples(case: StepCase, vocab: int) -> list[TrainSample]:
    """Episodes with an unmasked observation span, a read call whose name tokens carry selector
    credit, and old log-probs perturbed by `noise` so that some ratios clip."""
    rng = random.Random(case.seed)
    samples = []
    for i in range(case.num_samples):
        n = rng.randint(8, 24)
        mask = [1.0] * n
        for j in range(n // 2, n // 2 + 3):
            mask[j] = 0.0  # an observation message
        call = (1, 2, 3)  # a read call: out of the task stream; its token 2 names the skill
        w_task = [0.0 if j in call else m for j, m in enumerate(mask)]
        adv = 1.0 if i % 2 else -1.0
        samples.append(
            TrainSample(
                prompt_ids=[rng.randrange(vocab) for _ in range(rng.randint(2, 16))],
                response_ids=[rng.randrange(vocab) for _ in range(n)],
                fields={
                    "mask": mask,
                    "w_task": w_task,
                    "a_task": [adv] * n,
                    "w_sel": [1.0 if j == 2 else 0.0 for j in range(n)],
                    "a_sel": [0.5 - (i % 3 == 0)] * n,
                    "noise": [rng.uniform(-0.4, 0.4) for _ in range(n)],
                },
            )
        )
    return samples


def grpo_step_worker(ctx: WorkerContext, case: StepCase) -> dict:
    zero = resolve_zero(case.model_dir, case.engine)
    engine = build_engine(case.model_dir, case.engine, zero=zero)
    reference = build_reference(case.model_dir, case.engine, beta=case.beta)
    vocab = engine.module.config.vocab_size
    mine = hand_made_samples(case, vocab)[ctx.rank :: ctx.world_size]
    mbs = pack_samples(mine, PackingConfig(max_tokens=case.max_tokens))
    packed = len(mbs)
    mbs = pad_micro_batches(mbs, all_reduce_max(len(mbs)), field_names=FIELDS)
    normaliser = all_reduce_sum(global_token_normaliser(s.fields["mask"] for s in mine))

    with torch.no_grad():
        old = [token_logprobs(engine, mb) + mb.fields["noise"].to(ctx.device) for mb in mbs]
        ref = [token_logprobs(reference, mb) for mb in mbs] if reference is not None else [None] * len(mbs)
    loss_sum, clip = 0.0, 0.0
    for mb, logp_old, logp_ref in zip(mbs, old, ref, strict=True):
        logp = token_logprobs(engine, mb)
        f = {k: v.to(ctx.device) for k, v in mb.fields.items()}
        out = selector_grpo_loss(
            logp, logp_old, f["a_task"], f["a_sel"], f["w_task"], f["w_sel"], f["mask"], normaliser,
            selector_coef=case.selector_coef, logp_ref=logp_ref, beta=case.beta,
        )  # fmt: skip
        backward(engine, out.loss)
        loss_sum += out.loss.detach().item()
        clip += out.clip_fraction.item() * mb.fields["mask"].sum().item()
    stats = optimizer_step(engine)

    replica = load_replica(case.model_dir, case.engine)
    refresh_replica(replica, engine)
    weights = gathered_state_dict(engine)
    engine.eval()
    with torch.no_grad():
        probe = mbs[0]
        engine_logits = engine(input_ids=probe.input_ids.to(ctx.device), use_cache=False).logits.float().cpu()
        replica_logits = replica(input_ids=probe.input_ids.to(ctx.device), use_cache=False).logits.float().cpu()
    replica_equal = all(torch.equal(p.cpu(), weights[n]) for n, p in replica.named_parameters())
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "zero": asdict(zero),
        "engine_zero_stage": int(engine.zero_optimization_stage()),
        "engine_optimizer": type(engine.optimizer).__name__,
        "micro_batches": len(mbs),
        "packed_micro_batches": packed,
        "normaliser": normaliser,
        "loss": all_reduce_sum(loss_sum),
        "clipped_tokens": all_reduce_sum(clip),
        "grad_norm": stats.grad_norm,
        "lr": stats.lr,
        "weights": _save(weights, ctx) if ctx.rank == 0 else None,
        "replica_equal": replica_equal,
        "logit_gap": float((engine_logits - replica_logits).abs().max()),
    }


def _save(tensors: dict, ctx: WorkerContext) -> str:
    path = ctx.run_dir / f"weights-world{ctx.world_size}.pt"
    torch.save(tensors, path)
    return str(path)


def engine_checks_worker(ctx: WorkerContext, model_dir: str) -> dict:
    """Properties of a freshly built ZeRO-3 engine, before any step."""
    from transformers import AutoModelForCausalLM

    from skillgate_core.rl.engine.deepspeed_engine import compute_dtype, iter_gathered_parameters

    config = EngineConfig(zero_stage=3)
    engine = build_engine(model_dir, config)
    placeholder_sizes = [p.numel() for p in engine.module.parameters()]
    full_bytes = {n: p.ds_numel * p.element_size() for n, p in engine.module.named_parameters()}
    limit = max(full_bytes.values()) // 2  # forces several buckets and one oversized parameter alone
    buckets = [[name for name, _ in bucket] for bucket in iter_gathered_parameters(engine, limit)]
    gathered = gathered_state_dict(engine)
    elsewhere = gathered_state_dict(engine, only_rank=ctx.world_size)  # a rank that does not exist keeps nothing
    on_disk = dict(AutoModelForCausalLM.from_pretrained(model_dir, dtype=compute_dtype(config)).named_parameters())

    samples = hand_made_samples(StepCase(model_dir=model_dir, num_samples=4), engine.module.config.vocab_size)
    [mb] = pack_samples(samples, PackingConfig(max_tokens=512))
    reference = build_reference(model_dir, config, beta=1e-3)
    with torch.no_grad():
        old = token_logprobs(engine, mb)
        ref = token_logprobs(reference, mb)
    new = token_logprobs(engine, mb)
    return {
        "placeholders_empty": all(n == 0 for n in placeholder_sizes),
        "bucket_sizes": [sum(full_bytes[n] for n in b) for b in buckets],
        "bucket_limit": limit,
        "bucket_names": [n for b in buckets for n in b],
        "param_names": list(full_bytes),
        "gathered_equals_checkpoint": sorted(gathered) == sorted(on_disk)
        and all(torch.equal(gathered[n].cpu(), p.detach().cpu()) for n, p in on_disk.items()),
        "only_rank_elsewhere_is_empty": elsewhere == {},
        "ratio_exactly_one": bool(torch.equal(torch.exp(new - old), torch.ones_like(new))),
        "new_requires_grad": new.requires_grad,
        "reference_equals_policy": bool(torch.equal(ref, old)),
        "no_reference_at_beta_0": build_reference(model_dir, config, beta=0.0) is None,
    }


def describe_worker(ctx: WorkerContext, tag: str) -> dict:
    """Who am I, and can I import what the driver can (sys.path travelled)?"""
    import os

    import skillgate_core.rl.engine.packing as packing

    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "tag": tag,
        "packing_file": packing.__file__,
        "home": os.environ.get("SKILLGATE_HOME"),
        "run_dir": str(ctx.run_dir),
        "under_ray": ctx.under_ray,
        "pid": os.getpid(),
        "gcs_address": _gcs_address() if ctx.under_ray else None,
    }


def _gcs_address() -> str:
    import ray

    return ray.get_runtime_context().gcs_address


@dataclass(frozen=True)
class CheckpointCase:
    """Save a checkpoint of the model into `folder` (save), or load it back through
    skillgate_core.rl.engine.checkpoint_load (not save)."""

    model_dir: str
    folder: str
    save: bool
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(lr=1e-3, zero_stage=3))


def checkpoint_worker(ctx: WorkerContext, case: CheckpointCase) -> dict[str, object]:
    from pathlib import Path

    from skillgate_core.rl.engine.checkpoint_load import UnsafeCheckpoint, load_engine_checkpoint

    engine = build_engine(case.model_dir, case.engine)
    if case.save:
        engine.global_steps = 7  # a value the load must bring back
        engine.save_checkpoint(case.folder, tag="state")
        return {"saved": True}
    try:
        load_engine_checkpoint(engine, Path(case.folder), "state")
    except UnsafeCheckpoint as exc:
        return {"refused": str(exc)}
    return {"global_steps": engine.global_steps}


def sleeping_worker(ctx: WorkerContext, marker_dir: str) -> dict:
    """Say it started (a file named by its rank, holding its pid), then train forever: until stopped."""
    import os
    import time
    from pathlib import Path

    (Path(marker_dir) / f"rank{ctx.rank}").write_text(str(os.getpid()))
    time.sleep(3600)
    return {"rank": ctx.rank}

"""Stage `grpo`: a GRPO run owned by an experiment (docs/method.md 10), trained on Ray Train workers.

    train_grpo(GRPOConfig(profile="selector_clean_oracle_action_credit"),
               {"sft_model": model, "rl_data": rl_data, "bench": bench}, out_dir)

1. The experiment (`prepare_experiment`): a fresh run creates (or, after a crash before any
   checkpoint, reopens) experiment `grpo-PROFILE-HASH` (or `config.experiment_id`);
   `resume_experiment` continues an existing one from its latest checkpoint (and is never answered
   from the stage cache: GRPOConfig.reusable). Either way this process lifetime is a new segment,
   reported as it starts and ends (skillgate_core.base.stage_events: segment_started, segment_ended).
2. Training: `grpo.grpo_worker` on `num_workers` Ray Train workers (or in this process), which
   publishes checkpoints into the segment every `checkpoint_every` steps and the final export.
3. The stage's output `policy_export/` is that export (hard-linked, so no copy of the weights) plus
   export.json naming the experiment, segment and step; metrics.jsonl and curves.png sit beside it.

Nothing here writes the warehouse: the Prefect task records what it reports and what `metrics`
returns (experiment_id, run_name, checkpoints, the export, metrics_file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillgate_core.base.atomic import link_tree
from skillgate_core.base.config import canonical_json, config_digest
from skillgate_core.base.interrupts import interrupt_signal
from skillgate_core.base.paths import state_layout
from skillgate_core.base.stage_events import report
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.ownership import (
    ExperimentRecord,
    create_experiment,
    experiment_dir,
    experiments_root,
    finish_segment,
    latest_checkpoint,
    list_segments,
    open_experiment,
    start_segment,
)
from skillgate_core.ownership.errors import ExperimentExists, UnknownExperiment
from skillgate_core.ownership.layout import METRICS_FILE
from skillgate_core.policy.sglang_client import worker_sglang_urls
from skillgate_core.rl.engine.launch import LaunchConfig, launch_ray, run_in_process
from skillgate_core.rl.grpo import CREDIT_EPISODES_FILE, GRPOJob, grpo_worker
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.progress import follow_metrics, progress_style
from skillgate_core.rl.training_curves import plot_training_curves

__all__ = ["default_experiment_id", "prepare_experiment", "train_grpo"]


def default_experiment_id(config: GRPOConfig, inputs: Mapping[str, Path]) -> str:
    """grpo-PROFILE-HASH (grpo-PROFILE-VARIANT-HASH for a labelled variant): the same config (resume fields
    aside) on the same inputs is the same experiment."""
    fresh = {**json.loads(canonical_json(config.__dict__)), "resume_experiment": "", "experiment_id": ""}
    key = canonical_json([config_digest(type(config)(**fresh)), {r: str(p) for r, p in sorted(inputs.items())}])
    label = "-".join(x.replace("_", "-") for x in (config.profile, *config.variant.split("+")) if x)
    return f"grpo-{label}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def prepare_experiment(config: GRPOConfig, inputs: Mapping[str, str | Path]) -> ExperimentRecord:
    """The experiment this run trains in: `resume_experiment` opened (UnknownExperiment names the
    known ones), else the fresh run's experiment opened (a crash before any checkpoint: the same
    experiment goes on) or created. Idempotent: the Prefect task calls it before the run starts, so
    the run is recorded as the experiment's, and `train_grpo` calls it again."""
    root = experiments_root(state_layout())
    root.mkdir(parents=True, exist_ok=True)
    if config.resume_experiment:
        return open_experiment(root, config.resume_experiment)[1]
    paths = {role: Path(p).resolve() for role, p in inputs.items()}
    experiment_id = config.experiment_id or default_experiment_id(config, paths)
    try:
        return open_experiment(root, experiment_id)[1]
    except UnknownExperiment:
        pass
    try:
        return create_experiment(root, experiment_id, algorithm=f"grpo:{config.profile}", data=str(paths["rl_data"]),
                                 init=str(paths["sft_model"]),
                                 hypothesis=f"GRPO with profile {config.profile} (docs/method.md 7)")
    except ExperimentExists:  # another process created it just now
        return open_experiment(root, experiment_id)[1]


def _experiment_rows(root: Path, experiment_id: str, filename: str) -> list[dict[str, Any]]:
    """The rows of `filename` over all the experiment's segments in start order; a step written by
    more than one segment (work redone after a resume) keeps the latest segment's rows only."""
    exp = experiment_dir(root, experiment_id)
    by_step: dict[int, list[dict[str, Any]]] = {}
    for segment in sorted(list_segments(exp), key=lambda r: r.ordinal):
        path = exp.segment(segment.run_name) / filename
        if not path.is_file():
            continue
        mine: dict[int, list[dict[str, Any]]] = {}
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                mine.setdefault(int(row["step"]), []).append(row)
        by_step.update(mine)
    return [row for step in sorted(by_step) for row in by_step[step]]


def train_grpo(config: GRPOConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Run (or resume) a GRPO experiment; returns the export and the run's facts."""
    root = experiments_root(state_layout())
    experiment_id = prepare_experiment(config, inputs).experiment_id
    resume_from, start_step = None, 0
    if config.resume_experiment:
        latest = latest_checkpoint(experiment_dir(root, experiment_id))
        if latest is None:
            raise ValueError(f"grpo.resume_experiment = {experiment_id!r}: the experiment has no complete "
                             "checkpoint to resume from; start it fresh instead")
        if latest.step >= config.steps:
            raise ValueError(f"grpo.resume_experiment = {experiment_id!r}: its latest checkpoint is already at step "
                             f"{latest.step} and grpo.steps = {config.steps}: nothing left to train; set grpo.steps "
                             f"above {latest.step} to train it further")
        resume_from, start_step = Path(latest.path), latest.step
    run_name = f"seg-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    segment = start_segment(root, run_name, experiment_id=experiment_id, resume_from=resume_from,
                            expected_step=start_step if resume_from else None, host=socket.gethostname(),
                            pid=os.getpid())
    segment_dir = experiment_dir(root, experiment_id).segment(run_name)
    job = GRPOJob(
        config=config, model_dir=str(inputs["sft_model"]), rl_data=str(inputs["rl_data"]), bench=str(inputs["bench"]),
        experiments_root=str(root), experiment_id=experiment_id, run_name=run_name, segment_dir=str(segment_dir),
        resume_checkpoint=str(resume_from) if resume_from else "", start_step=start_step,
        scratch_dir=str(out_dir / "scratch"), progress=progress_style() if config.launcher == "process" else "off",
        sglang_urls=worker_sglang_urls() if config.rollout_source == "sglang" else (),
    )
    try:
        report("segment_started", segment=segment)
        if config.launcher == "process":
            results = run_in_process(grpo_worker, job).results
        else:
            launch = LaunchConfig(num_workers=config.num_workers, use_gpu=config.use_gpu,
                                  max_failures=config.max_failures, storage_path=str(out_dir / "ray"),
                                  name=f"{experiment_id}-{run_name}")
            desc = f"grpo {experiment_id}"
            # Ray's start, then each worker's DeepSpeed engine and the first rollouts: minutes under load
            print(f"{desc}: starting Ray and {config.num_workers} Ray Train workers (DeepSpeed); "
                  "the first step follows their start-up", file=sys.stderr, flush=True)
            with follow_metrics(segment_dir / METRICS_FILE, total=config.steps, initial=start_step, desc=desc,
                                style=progress_style(), waiting="still starting (Ray, DeepSpeed, first rollouts)"):
                results = launch_ray(grpo_worker, job, launch).results
    except BaseException as exc:
        ended = "interrupted" if interrupt_signal(exc) else "failed"
        report("segment_ended", segment=finish_segment(root, experiment_id, run_name, ended))
        raise
    report("segment_ended", segment=finish_segment(root, experiment_id, run_name, "completed"))
    summary = results[0]
    export = summary["export"]
    target = out_dir / "policy_export"
    link_tree(Path(export["path"]), target)
    (target / "export.json").write_text(json.dumps(
        {"experiment_id": experiment_id, "run_name": run_name, **export}, indent=2, sort_keys=True) + "\n")
    training_dir = out_dir / "training"
    training_dir.mkdir()
    rows = _experiment_rows(root, experiment_id, METRICS_FILE)
    (training_dir / "metrics.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    credit = _experiment_rows(root, experiment_id, CREDIT_EPISODES_FILE)
    (training_dir / CREDIT_EPISODES_FILE).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in credit))
    plot_training_curves(rows, training_dir / "curves.png", title=f"{experiment_id} ({config.profile})")
    shutil.rmtree(out_dir / "scratch", ignore_errors=True)
    last = rows[-1] if rows else {}
    metrics: dict[str, Any] = {
        "experiment_id": experiment_id,
        "run_name": run_name,
        "segment_ordinal": segment.ordinal,
        "resumed_from_step": start_step,
        "steps": config.steps,
        "variant": config.variant,
        # grpo.zero_stage "auto" resolves by machine: what this segment's engine ran with, and why
        "zero_stage_resolved": summary["zero_stage_resolved"],
        "zero_stage_reason": summary["zero_stage_reason"],
        # steps whose groups were all rejected take no optimizer step: what each arm really trained on
        "optimizer_steps": sum(bool(r.get("optimizer_step_taken", r.get("trained"))) for r in rows),
        "export_id": export["export_id"],
        "export_path": export["path"],
        "export_step": export["step"],
        "export_weights_sha256": export["weights_sha256"],
        "checkpoints": [{"step": c["step"], "path": c["path"]} for c in summary["checkpoints"]],
        "metrics_file": str(training_dir / "metrics.jsonl"),
        "curves": str(training_dir / "curves.png"),
        **{f"last_{k}": v for k, v in last.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
    }
    return StageOutput(outputs={"policy_export": target}, metrics=metrics)

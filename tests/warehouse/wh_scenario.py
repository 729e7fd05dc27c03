"""A realistic lineage for the warehouse tests, built through the real ownership and recording APIs.

(A module with its own name rather than conftest.py, so test modules can import from it.)

`lineage_scenario(state)` records: an external benchmark; a data-prep run deriving RL data from it;
experiment exp-1 whose first GRPO run (segment seg-a) trains steps 0-11, checkpoints and exports
step 10 and is preempted, and whose second run resumes in segment seg-b from step 10, trains steps
10-19 (so steps 10 and 11 are trained twice) and exports step 20; per-step training metrics of both
segments (metrics.jsonl on disk, training_metric rows: reward = step / 100, seg-b's + 1); an
eval70-style evaluation of step-20 (8 trial rows on disk and in eval_trial, metrics overall and
per benchmark) by an eval run that read the export and the benchmark. Every file the warehouse
names exists on disk, so `verify` is clean.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from skillgate_core.base.digests import path_sha256
from skillgate_core.base.paths import StateLayout
from skillgate_core.ownership import (
    build_export,
    create_experiment,
    experiment_dir,
    experiments_root,
    finish_eval,
    finish_segment,
    save_checkpoint,
    start_eval,
    start_segment,
    write_eval_row,
)
from warehouse import (
    DatasetVersion,
    EvalMetric,
    EvalMetrics,
    EvalProtocol,
    EvalTrial,
    EvalTrials,
    EvaluationFinished,
    RunFinished,
    RunInput,
    RunStarted,
    checkpoint_saved,
    eval_key,
    evaluation_started,
    experiment_created,
    ingest,
    metric_key,
    model_exported,
    record,
    segment_ended,
    segment_started,
    training_metrics,
)

T0 = "2025-01-01T00:00:00.000000Z"
GIT = "0123456789abcdef0123456789abcdef01234567"
PROTOCOL = "eval70_v1-mixed-4-0123456789"


def write_model(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")


def run_started(run_id: str, stage: str, experiment_id: str | None = None, trigger: str = "test") -> RunStarted:
    body = {"stage": stage, "lr": 1e-6}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return RunStarted(run_id=run_id, stage=stage, trigger=trigger, git_sha=GIT, git_dirty=False,  # type: ignore[arg-type]
                      config_digest=digest, config_type=f"{stage}Config", config_body=body, started_at=T0,
                      flow_run_id=f"flow-{run_id}", experiment_id=experiment_id)


def train_rows(root: Path, run_name: str, steps: range, *, bonus: float) -> list[dict]:
    """metrics.jsonl rows of a training segment, written into its folder."""
    rows = [{"step": k, "reward": k / 100 + bonus, "kl": None, "trained": True, "profile": "p",
             "rejected": {"zero_variance": k % 3}} for k in steps]
    path = experiment_dir(root, "exp-1").metrics_file(run_name)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@dataclass
class Scenario:
    """Ids of what lineage_scenario recorded."""

    state: StateLayout
    root: Path
    bench_sha: str
    rl_sha: str
    exports: dict[str, str] = field(default_factory=dict)
    """export name -> warehouse export id"""
    export_shas: dict[str, str] = field(default_factory=dict)
    eval_id: str = ""
    metrics: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def lineage_scenario(state: StateLayout, *, ingest_each: bool = False) -> Scenario:
    rec = functools.partial(record, state=state, ingest_now=ingest_each)
    root = experiments_root(state)
    data = state.home / "datasets"
    data.mkdir(parents=True, exist_ok=True)
    bench = data / "bench.json"
    bench.write_text(json.dumps({"tasks": ["t0", "t1"]}))
    bench_sha = path_sha256(bench)
    prep_out = state.home / "artifacts" / "rl-data-prep" / "k1"
    prep_out.mkdir(parents=True, exist_ok=True)
    rl = prep_out / "rl_train.parquet"
    rl.write_bytes(b"PAR1-synthetic")
    rl_sha = path_sha256(rl)
    sc = Scenario(state=state, root=root, bench_sha=bench_sha, rl_sha=rl_sha)

    rec(run_started("prep-1", "rl-data-prep"),
        DatasetVersion(sha256=bench_sha, uri=str(bench), dataset_kind="bench", created_at=T0),
        RunInput(run_id="prep-1", role="bench", dataset_sha256=bench_sha))
    rec(DatasetVersion(sha256=rl_sha, uri=str(rl), dataset_kind="rl_data", created_at=T0, produced_by_run="prep-1"),
        RunFinished(run_id="prep-1", status="completed", finished_at=T0))

    exp = create_experiment(root, "exp-1", algorithm="grpo:skillgate", data=rl_sha, init="sft", hypothesis="h")
    rec(experiment_created(exp, root))

    # first GRPO run: segment seg-a, checkpoint + export at step 10, preempted
    rec(run_started("grpo-1", "grpo", "exp-1"), RunInput(run_id="grpo-1", role="rl_data", dataset_sha256=rl_sha))
    seg_a = start_segment(root, "seg-a", experiment_id="exp-1")
    rec(segment_started(seg_a, "grpo-1"))
    rows_a = train_rows(root, "seg-a", range(12), bonus=0.0)
    ckpt = save_checkpoint(root, "exp-1", "seg-a", 10, lambda d: (d / "state.bin").write_bytes(b"s10"))
    rec(checkpoint_saved(ckpt, "exp-1", "grpo-1"), training_metrics("exp-1", "seg-a", "grpo-1", rows_a))
    x10 = build_export(root, "exp-1", "step-10", run_name="seg-a", step=10, write=write_model, lineage={"run_id": "grpo-1"})
    rec(model_exported(x10, "grpo-1"))
    rec(segment_ended(finish_segment(root, "exp-1", "seg-a", "preempted")),
        RunFinished(run_id="grpo-1", status="failed", finished_at=T0, error="preempted"))

    # second GRPO run resumes from step 10 in segment seg-b
    rec(run_started("grpo-2", "grpo", "exp-1"), RunInput(run_id="grpo-2", role="rl_data", dataset_sha256=rl_sha))
    seg_b = start_segment(root, "seg-b", experiment_id="exp-1",
                          resume_from=experiment_dir(root, "exp-1").checkpoints("seg-a"), expected_step=10)
    rec(segment_started(seg_b, "grpo-2"))
    rec(training_metrics("exp-1", "seg-b", "grpo-2", train_rows(root, "seg-b", range(10, 20), bonus=1.0)))
    x20 = build_export(root, "exp-1", "step-20", run_name="seg-b", step=20, write=write_model, lineage={"run_id": "grpo-2"})
    rec(model_exported(x20, "grpo-2"))
    rec(segment_ended(finish_segment(root, "exp-1", "seg-b", "completed")),
        RunFinished(run_id="grpo-2", status="completed", finished_at=T0))

    # evaluation of step-20 by an eval run that read the export and the benchmark
    rec(EvalProtocol(fingerprint=PROTOCOL, spec_id="eval70_v1", body={"repeats": 4, "seed": 7}, created_at=T0))
    rec(run_started("eval-1", "eval70", "exp-1"),
        RunInput(run_id="eval-1", role="policy_export", dataset_sha256=x20.weights_sha256),
        RunInput(run_id="eval-1", role="bench", dataset_sha256=bench_sha))
    ev = start_eval(root, "exp-1", "eval70-step-20", export_id="step-20", protocol_fingerprint=PROTOCOL)
    rec(evaluation_started(ev, experiment_dir(root, "exp-1").eval("eval70-step-20"), run_id="eval-1",
                           dataset_sha256=bench_sha))
    eval_id = eval_key("exp-1", "eval70-step-20")
    trials = []
    for i in range(8):
        outcome = ("resolved", "fail", "error", "fail")[i % 4]
        bench_name = ("procedural", "abductive")[i % 2]
        write_eval_row(root, "exp-1", "eval70-step-20", f"t{i // 4}-r{i % 4}", {"outcome": outcome})
        trials.append(EvalTrial(row_id=f"t{i // 4}-r{i % 4}", trial_index=i, task_id=f"t{i // 4}",
                                benchmark=bench_name, repeat=i % 4, outcome=outcome, reward=float(outcome == "resolved"),
                                n_turns=3, n_reads=1))  # type: ignore[arg-type]
    rec(EvalTrials(eval_id=eval_id, trials=tuple(trials)))
    metrics = (EvalMetric("trial_success", 0.25, n=8), EvalMetric("pass_at_4", 1.0, n=2),
               EvalMetric("trial_success", 0.5, scope="procedural", n=4))
    rec(EvalMetrics(eval_id=eval_id, metrics=metrics))
    rec(EvaluationFinished(eval_id=eval_id, status="completed", finished_at=T0),
        RunFinished(run_id="eval-1", status="completed", finished_at=T0))
    finish_eval(root, "exp-1", "eval70-step-20", "completed")
    if not ingest_each:
        report = ingest(state, lock_wait_s=10, db_wait_s=10)
        assert report.rejected == 0 and report.pending == 0, report

    sc.exports = {"step-10": "exp-1/step-10", "step-20": "exp-1/step-20"}
    sc.export_shas = {"step-10": x10.weights_sha256, "step-20": x20.weights_sha256}
    sc.eval_id = eval_id
    sc.metrics = [metric_key(eval_id, m.name, m.scope) for m in metrics]
    sc.runs = ["prep-1", "grpo-1", "grpo-2", "eval-1"]
    return sc

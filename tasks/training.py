"""Recording a training stage (grpo) in the warehouse, and its Prefect artifacts.

The stage owns an experiment (docs/method.md 10). Around `run_stage`, the stage task:

  before   opens or creates the experiment (StageSpec.experiment) and records it, so the run is
           recorded as that experiment's from its start;
  during   records the segment as the stage reports it started and ended (skillgate_core.base.stage_events);
  after    records what the stage returned: each checkpoint, one metric row per step per metric
           (the segment's steps of `metrics_file`), and the export (model_export of this run and
           segment); after a failure, the checkpoints and metric rows the segment left on disk.

Everything goes through `warehouse.record` (the spool; ingest applies it): the Ray workers that
trained never touch the warehouse. Then a table artifact of the per-step metrics and a markdown
artifact with the curves PNG (a small data-URI copy the UI shows: tasks/artifact_images.py), the
export and how to resume.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from skillgate_core.ownership import (
    CheckpointRef,
    SegmentRecord,
    experiment_dir,
    load_export,
)
from skillgate_core.pipeline.run import StageRecord
from tasks.artifact_images import png_data_uri
from tasks.home_paths import shown_path
from warehouse import (
    StageRunRecorder,
    left_on_disk,
    model_exported,
    read_metric_rows,
    record,
    segment_ended,
    segment_started,
    training_records,
)

__all__ = ["ARTIFACT_COLUMNS", "TrainingRecorder", "training_artifacts"]

log = logging.getLogger(__name__)

ARTIFACT_COLUMNS = (
    "step", "reward", "success_rate", "oracle_read_rate", "misleading_read_rate", "clean_oracle_rate",
    "accepted_success_rate", "groups_drawn", "groups_accepted", "optimizer_steps", "grad_norm", "learning_rate",
    "selector_active_fraction", "task_token_mass", "selector_token_mass", "selection_token_share", "kl", "loss",
    "clip_fraction", "rollout_tokens_per_s", "train_tokens_per_s", "time_generate_s", "time_env_s", "time_train_s",
    "time_sync_s", "time_step_s",
)
"""The columns of the per-step table artifact (every other number is in the warehouse)."""


@dataclasses.dataclass
class TrainingRecorder:
    """Records one training run's experiment facts; `on_report` is the stage's listener."""

    run: StageRunRecorder
    """The stage run (recorded with the experiment's id, no segment of its own)."""
    root: Path
    """The experiments root."""
    segments: list[SegmentRecord] = dataclasses.field(default_factory=list)
    """Segments the stage started in this run."""

    def on_report(self, kind: str, facts: Mapping[str, Any]) -> None:
        if kind == "segment_started":
            self.segments.append(facts["segment"])
            record(segment_started(facts["segment"], self.run.run_id), state=self.run.state)
        elif kind == "segment_ended":
            record(segment_ended(facts["segment"]), state=self.run.state)

    def _record(self, groups: list[tuple[Any, ...]]) -> None:
        for group in groups:
            record(*group, state=self.run.state)

    def record_finished(self, result: StageRecord) -> None:
        """After the stage returned: checkpoints, this segment's metric rows, the export."""
        m = result.metrics
        experiment_id, run_name = m["experiment_id"], m["run_name"]
        first = int(m.get("resumed_from_step") or 0)  # metrics_file holds the whole experiment's curve
        rows = [r for r in read_metric_rows(Path(m["metrics_file"])) if int(r["step"]) >= first]
        checkpoints = [CheckpointRef(run_name=run_name, step=int(c["step"]), path=str(c["path"]))
                       for c in m["checkpoints"]]
        self._record(training_records(experiment_id, run_name, self.run.run_id, checkpoints, rows))
        export = load_export(experiment_dir(self.root, experiment_id), m["export_id"])
        if export is None:
            raise RuntimeError(f"grpo: export {m['export_id']!r} of {experiment_id!r} is not published")
        export = dataclasses.replace(export, weights_sha256=m["export_weights_sha256"])
        record(model_exported(export, self.run.run_id), state=self.run.state)

    def record_failed(self) -> None:
        """After the stage raised: what its segments left on disk (complete checkpoints, metric rows).
        Never raises: the stage's own error is the one to report."""
        for seg in self.segments:
            try:
                self._record(left_on_disk(self.root, seg.experiment_id, seg.run_name, self.run.run_id))
            except Exception as exc:  # `skillgate warehouse verify` lists what is missing
                log.warning("grpo: could not record what segment %s left (%s: %s)", seg.run_name,
                            type(exc).__name__, exc)


def _cell(value: object) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}") if math.isfinite(value) else None
    return value


def training_artifacts(stage: str, result: StageRecord) -> None:
    """The per-step table and the curves/export summary of a training stage's result."""
    m = result.metrics
    rows = read_metric_rows(Path(m["metrics_file"]))
    experiment_id = m["experiment_id"]
    create_table_artifact(
        key=f"{stage}-training-metrics",
        table=[{c: _cell(r.get(c)) for c in ARTIFACT_COLUMNS} for r in rows],
        description=f"Per-step metrics of experiment `{experiment_id}` (every segment; "
                    f"`skillgate sql \"select * from training_curve('{experiment_id}')\"`)",
    )
    curves = Path(m["curves"])
    last = rows[-1] if rows else {}
    facts = [("reward", "reward"), ("success rate", "success_rate"), ("clean-oracle rate", "clean_oracle_rate"),
             ("kl", "kl"), ("step time (s)", "time_step_s")]
    lines = [
        f"# {stage}: experiment `{experiment_id}`",
        "",
        f"![training curves]({png_data_uri(curves)})" if curves.is_file() else "(no curves drawn)",
        "",
        f"Curves, full size: `{shown_path(curves)}`",
        "",
        "| | |", "|---|---|",
        f"| segment | `{m['run_name']}` (ordinal {m['segment_ordinal']}, from step {m['resumed_from_step']}) |",
        f"| steps | {m['steps']} ({'reused, nothing trained' if result.reused else 'trained now'}) |",
        f"| checkpoints | {', '.join(str(c['step']) for c in m['checkpoints']) or 'none'} |",
        f"| export | `{m['export_id']}` at `{shown_path(m['export_path'])}` |",
        *[f"| last {label} | {_cell(last.get(key))} |" for label, key in facts if last.get(key) is not None],
        "",
        f"Resume: `skillgate run RECIPE --execute --resume {experiment_id} grpo.steps=N` "
        f"(deployment parameter `resume: {experiment_id}`).",
        "",
        f"Curve by SQL: `skillgate sql \"select * from training_curve('{experiment_id}')\"`",
    ]
    create_markdown_artifact(key=f"{stage}-training-report", markdown="\n".join(lines),
                             description=f"Training curves of {experiment_id}")

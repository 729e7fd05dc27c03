"""Where each owned artifact of an experiment lives on disk (docs/method.md 10). Paths only, no I/O.

    SKILLGATE_HOME/experiments/
      EXPERIMENT_ID/
        experiment.json                     what the experiment tests: algorithm, data, init, hypothesis
        .lock                               serialises segment starts (ordinal allocation)
        segments/RUN_NAME/                  one per process lifetime / resume
          run.json                          host, pid, ordinal, resumed_from, exit reason
          metrics.jsonl                     training stages: one JSON row per optimizer step
          checkpoints/step_00000200/        complete checkpoints (COMPLETE marker inside)
        model/exports/EXPORT_ID/            validated exports: config, shards, index, lineage.json, COMPLETE
        eval/EVAL_ID/                       one evaluation of one export under one protocol
          eval.json
          rows/ROW_ID/row.json              one trial row

Anything whose name starts with ".tmp-" is a build in progress (or the remains of a killed one) and
is never listed as an artifact.

    exp = experiment_dir(experiments_root(state_layout()), "grpo-skillgate-001")
    exp.export("step-200")   # .../grpo-skillgate-001/model/exports/step-200
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from skillgate_core.base.atomic import TMP_PREFIX
from skillgate_core.base.paths import StateLayout
from skillgate_core.base.safe_paths import NAME_RULE, is_safe_name
from skillgate_core.ownership.errors import InvalidName

__all__ = [
    "COMPLETE_MARKER",
    "EVAL_FILE",
    "EXPERIMENT_FILE",
    "LINEAGE_FILE",
    "METRICS_FILE",
    "ROW_FILE",
    "SEGMENT_FILE",
    "TMP_PREFIX",
    "ExperimentDir",
    "checkpoint_name",
    "check_name",
    "experiment_dir",
    "experiments_root",
    "parse_checkpoint_name",
]

EXPERIMENT_FILE = "experiment.json"
SEGMENT_FILE = "run.json"
EVAL_FILE = "eval.json"
ROW_FILE = "row.json"
LINEAGE_FILE = "lineage.json"
METRICS_FILE = "metrics.jsonl"
COMPLETE_MARKER = "COMPLETE"

_CHECKPOINT = re.compile(r"step_(\d{8,})")


def check_name(kind: str, value: str | None) -> str:
    """Return `value` if it is a safe folder name, else raise InvalidName naming `kind`."""
    if not is_safe_name(value):  # ids become folder names: the one rule of safe_paths
        raise InvalidName(f"{kind} {value!r} is not a valid name: use {NAME_RULE}")
    assert isinstance(value, str)  # is_safe_name checked it
    return value


def checkpoint_name(step: int) -> str:
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    return f"step_{step:08d}"


def parse_checkpoint_name(name: str) -> int | None:
    m = _CHECKPOINT.fullmatch(name)
    return int(m.group(1)) if m else None


def experiments_root(state: StateLayout) -> Path:
    """SKILLGATE_HOME/experiments: the root every ownership function takes."""
    return state.experiments


# Paths, not logic: one accessor per file and folder of the layout.
@dataclass(frozen=True)
class ExperimentDir:
    """The folder of one experiment and the paths inside it."""

    root: Path
    """SKILLGATE_HOME/experiments/EXPERIMENT_ID (absolute)."""

    @property
    def experiment_id(self) -> str:
        return self.root.name

    @property
    def experiment_file(self) -> Path:
        return self.root / EXPERIMENT_FILE

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    @property
    def segments(self) -> Path:
        return self.root / "segments"

    def segment(self, run_name: str) -> Path:
        return self.segments / check_name("RUN_NAME", run_name)

    def segment_file(self, run_name: str) -> Path:
        return self.segment(run_name) / SEGMENT_FILE

    def metrics_file(self, run_name: str) -> Path:
        return self.segment(run_name) / METRICS_FILE

    def checkpoints(self, run_name: str) -> Path:
        return self.segment(run_name) / "checkpoints"

    def checkpoint(self, run_name: str, step: int) -> Path:
        return self.checkpoints(run_name) / checkpoint_name(step)

    @property
    def exports(self) -> Path:
        return self.root / "model" / "exports"

    def export(self, export_id: str) -> Path:
        return self.exports / check_name("EXPORT_ID", export_id)

    @property
    def evals(self) -> Path:
        return self.root / "eval"

    def eval(self, eval_id: str) -> Path:
        return self.evals / check_name("EVAL_ID", eval_id)

    def eval_file(self, eval_id: str) -> Path:
        return self.eval(eval_id) / EVAL_FILE

    def rows(self, eval_id: str) -> Path:
        return self.eval(eval_id) / "rows"

    def row(self, eval_id: str, row_id: str) -> Path:
        return self.rows(eval_id) / check_name("ROW_ID", row_id)


def experiment_dir(root: Path, experiment_id: str) -> ExperimentDir:
    """The ExperimentDir of `experiment_id` under the experiments root (the id is checked, not the disk)."""
    return ExperimentDir(Path(root).resolve() / check_name("EXPERIMENT_ID", experiment_id))

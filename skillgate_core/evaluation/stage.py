"""Stage `eval70`: a policy export x a frozen protocol (eval70_v1 by default) -> eval_rows.

    run_eval70(Eval70Config(), {"policy_export": export_dir, "bench": bench}, out_dir)
    -> out_dir/eval_rows/{eval_trials.parquet, summary.json, protocol.json,
                          probe_rows.parquet, probe_summary.json}

The selection probe (evaluation/probe.py) of the same policy on the same protocol is written beside
the rows (a local model only: an endpoint gives no teacher-forced log-probs); the paper's main table
reads it from there.

The evaluation itself is owned by the experiment that owns the export (evaluation/runner.py):
experiments/EXP/eval/EVAL_ID holds the rows, the per-trial logs and the same parquet. A stage run
killed midway leaves that evaluation incomplete; running the stage again resumes it (only the
missing trials are played) and then publishes eval_rows. `demo_repeats` is the explicit demo
override: fewer repeats make another protocol (its id and fingerprint say so, summary.json records it).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillgate_core.base.atomic import atomic_write_json
from skillgate_core.base.config_ranges import NonNegativeInt, PositiveInt, check_ranges
from skillgate_core.base.paths import state_layout
from skillgate_core.base.run_paths import check_run_path
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.credit.premise import prefixed
from skillgate_core.evaluation.owner import PolicyRef, resolve_policy
from skillgate_core.evaluation.probe import ProbeConfig, probe_selection, write_probe
from skillgate_core.evaluation.runner import (
    ABORTED_FILE,
    PARQUET_FILE,
    SUMMARY_FILE,
    EvalResult,
    EvalRunConfig,
    run_evaluation,
)
from skillgate_core.evaluation.specs import SPECS_DIR, ResolvedProtocol, build_protocol, load_spec, spec_path

__all__ = ["Eval70Config", "evaluate_export", "run_eval70"]


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class Eval70Config:
    """Which protocol, and how to run it (only `protocol` and `demo_repeats` change what is measured)."""

    protocol: str = "eval70_v1"
    """Protocol spec: a shipped name (eval70_v1, slate147) or a path to a spec .toml inside the state dir or
    a folder of SKILLGATE_INPUT_DIRS (base.run_paths: it is a run parameter)."""
    demo_repeats: NonNegativeInt = 0
    """Explicit demo override: this many repeats instead of the protocol's (0 = as specified). Another
    protocol id and fingerprint; recorded in summary.json and the evaluation."""
    pin: str = ""
    """Protocol id the run must have ('' = none); another one is refused, naming both fingerprints."""
    tag: str = ""
    """Evaluation tag (part of the evaluation id; the nightly sets nightly-YYYY-MM-DD)."""
    method: str = ""
    """Row label ('' = the export id)."""
    batch_episodes: PositiveInt = 8
    """Episodes in flight together (one lockstep batch)."""
    sandbox_workers: PositiveInt = 4
    """Threads running sandbox work concurrently."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the model runs."""
    cpu_threads: NonNegativeInt = 1
    """torch threads on CPU (0 = torch's default)."""
    max_trials: NonNegativeInt = 0
    """Stop after this many trials of this run (the stage then fails with the evaluation incomplete; the
    next run resumes it). 0 = all."""
    probe: bool = True
    """Also run the selection probe (one teacher-forced pass per task) and write it beside the rows."""
    probe_turn: Literal["call", "reasoning"] = "call"
    """The probe's scored first turn (ProbeConfig.turn)."""

    def __post_init__(self) -> None:
        check_ranges(self)
        check_run_path(spec_path(self.protocol), "protocol", catalog=(SPECS_DIR,))

    def run_config(self) -> EvalRunConfig:
        return EvalRunConfig(batch_episodes=self.batch_episodes, sandbox_workers=self.sandbox_workers, tag=self.tag,
                             method=self.method, device=self.device, cpu_threads=self.cpu_threads,
                             max_trials=self.max_trials, pin=self.pin)


def _resolve(config: Eval70Config, policy: str | Path, bench: str | Path) -> tuple[Path, PolicyRef, ResolvedProtocol]:
    """(experiments root, the owner of `policy`, the protocol built on `bench`)."""
    root = state_layout().experiments
    ref = resolve_policy(str(policy), root=root)
    return root, ref, build_protocol(load_spec(config.protocol), bench, demo_repeats=config.demo_repeats)


def evaluate_export(config: Eval70Config, policy: str | Path, bench: str | Path, *, progress: bool = True) -> EvalResult:
    """Resolve the owner of `policy`, build the protocol on `bench`, run (or resume) the evaluation."""
    root, ref, resolved = _resolve(config, policy, bench)
    return run_evaluation(resolved, ref, config.run_config(), root=root, progress=progress)


def run_eval70(config: Eval70Config, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """The stage function (module docstring)."""
    root, ref, resolved = _resolve(config, inputs["policy_export"], inputs["bench"])  # once: the probe reuses both
    result = run_evaluation(resolved, ref, config.run_config(), root=root)
    if result.status != "completed" or result.summary is None:
        raise RuntimeError(
            f"evaluation {result.experiment_id}/{result.eval_id} is {result.status}: {result.trials_done} of "
            f"{result.trials_total} trials have rows"
            + (f" ({result.trials_aborted} aborted on infrastructure failures: {result.eval_dir / ABORTED_FILE})"
               if result.trials_aborted else "")
            + "; run the stage again to resume the missing ones"
        )
    target = out_dir / "eval_rows"
    target.mkdir(parents=True)
    shutil.copy2(result.parquet, target / PARQUET_FILE)
    atomic_write_json(target / SUMMARY_FILE, result.summary)
    protocol_file = state_layout().home / "protocols" / f"{result.summary['protocol_id']}.json"
    if protocol_file.is_file():
        shutil.copy2(protocol_file, target / "protocol.json")
    s = result.summary
    probe: dict[str, object] = {}
    if config.probe and ref.model_dir is not None:
        probed = probe_selection(resolved, ref.model_dir, ProbeConfig(turn=config.probe_turn, device=config.device,
                                                                       cpu_threads=config.cpu_threads))
        write_probe(probed, target, method=s["method"])
        probe = {"probe_oracle_rank1_rate": probed.summary["oracle_rank1_rate"],
                 "probe_oracle_rank1_ci": probed.summary["oracle_rank1_ci"],
                 "probe_oracle_mass": probed.summary["oracle_mass"],
                 "probe_misleading_mass": probed.summary["misleading_mass"]}
    metrics = {k: s[k] for k in ("protocol_id", "fingerprint", "experiment_id", "export_id", "eval_id", "method",
                                 "trials", "tasks", "errors", "trial_success", "read_rate", "clean_oracle_rate")}
    metrics.update({k: v for k, v in s.items() if k.startswith("pass@")}, eval_dir=str(result.eval_dir),
                   trials_run=result.trials_run, demo=s["demo"], note=s["note"], **probe)
    # the premise checks (docs/method.md 8b), one scalar each; a summary written before them has none
    metrics.update(prefixed(s.get("premise") or {}))
    return StageOutput(outputs={"eval_rows": target}, metrics=metrics)

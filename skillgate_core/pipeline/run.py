"""Running one stage: pure function over paths, output built in a temp dir and renamed into place.

The output folder is keyed by sha256(stage, config digest, input digests), so the same stage on the
same inputs and config lands in the same folder: a finished one (it holds `stage_result.json`) is
reused instead of recomputed, and a half-built one is never visible (it lives under a temp name
until the rename). A temp folder records its owner process (stage_workdirs.py): the folders of runs
killed outright (SIGKILL, power loss) are removed by the next run of the stage.

A config whose `reusable` property is False is never reused and always runs, in a folder of its
own: a resume continues an experiment whose checkpoints are not among the stage's inputs, so the
same config and inputs do not mean the same result.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.base.atomic import atomic_write_json, publish_dir
from skillgate_core.base.config import canonical_json, config_digest, config_to_dict
from skillgate_core.base.dataclass_json import dataclass_from_json
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.interrupts import SignalStop, stop_requested
from skillgate_core.base.paths import StateLayout
from skillgate_core.pipeline.stage_workdirs import new_workdir, release_workdir, remove_dead_workdirs
from skillgate_core.pipeline.stages import get_stage

__all__ = ["RESULT_FILE", "StageRecord", "finished_run", "run_stage"]

RESULT_FILE = "stage_result.json"


@dataclass(frozen=True)
class StageRecord:
    """The outcome of one stage run, as JSON-able facts (what tasks return and the warehouse stores)."""

    stage: str
    """Stage name."""
    config_digest: str
    """sha256 of the stage's config."""
    config: Mapping[str, Any]
    """The config values."""
    inputs: Mapping[str, str]
    """Input role -> path."""
    input_digests: Mapping[str, str]
    """Input role -> sha256 of its content."""
    outputs: Mapping[str, str]
    """Output role -> path."""
    output_digests: Mapping[str, str]
    """Output role -> sha256 of its content."""
    out_dir: str
    """The stage run's folder."""
    metrics: Mapping[str, Any]
    """What the stage reported."""
    seconds: float
    """Wall time of the stage function (0 when reused)."""
    reused: bool
    """True when a finished identical run was found and nothing was recomputed."""

    def to_json(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StageRecord:
        return dataclass_from_json(cls, data, source=RESULT_FILE, strictness="exact")


def _relocated(value: object, work: Path, final: Path) -> Any:
    """`value` with every path string inside the temp folder `work` rewritten into `final` (a
    stage reports paths under the out_dir it was given; the folder is renamed once it is done)."""
    if isinstance(value, str):
        for prefix in {str(work), str(work.resolve())}:
            if value == prefix or value.startswith(prefix + "/"):
                return str(final) + value[len(prefix):]
        return value
    if isinstance(value, Mapping):
        return {k: _relocated(v, work, final) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_relocated(v, work, final) for v in value]
    return value


@dataclass(frozen=True)
class _RunKey:
    input_paths: dict[str, Path]
    input_digests: dict[str, str]
    config_digest: str
    reusable: bool
    key: str
    final: Path


def _run_key(stage: str, config: object, inputs: Mapping[str, str | Path], layout: StateLayout) -> _RunKey:
    spec = get_stage(stage)
    if not isinstance(config, spec.config_class()):
        raise TypeError(f"stage '{stage}' expects a {spec.config_class().__name__}, got {type(config).__name__}")
    missing = [r for r in spec.inputs if r not in inputs]
    if missing:
        raise FileNotFoundError(f"stage '{stage}': missing input roles {missing}")
    input_paths = {r: Path(inputs[r]).resolve() for r in spec.inputs}
    input_digests = {r: path_sha256(p) for r, p in input_paths.items()}
    cdigest = config_digest(config)
    reusable = bool(getattr(config, "reusable", True))
    fresh = [] if reusable else [f"run:{uuid.uuid4().hex}"]  # a run of its own: never a finished folder
    key = hashlib.sha256(canonical_json([stage, cdigest, input_digests, *fresh]).encode()).hexdigest()[:16]
    return _RunKey(input_paths, input_digests, cdigest, reusable, key, layout.stage_dir(stage, key))


def _reused(final: Path) -> StageRecord:
    record = StageRecord.from_json(json.loads((final / RESULT_FILE).read_text()))
    return StageRecord(**{**record.__dict__, "reused": True, "seconds": 0.0})


def finished_run(stage: str, config: object, inputs: Mapping[str, str | Path], layout: StateLayout) -> StageRecord | None:
    """The finished identical run `run_stage` would reuse (reused=True), or None when it would compute."""
    k = _run_key(stage, config, inputs, layout)
    return _reused(k.final) if k.reusable and (k.final / RESULT_FILE).is_file() else None


def run_stage(stage: str, config: object, inputs: Mapping[str, str | Path], layout: StateLayout) -> StageRecord:
    """Run `stage` with `config` on `inputs` (role -> path) under `layout`; reuse an identical finished run."""
    spec = get_stage(stage)
    fn = spec.run_function()
    k = _run_key(stage, config, inputs, layout)
    input_paths, input_digests, cdigest, key, final = k.input_paths, k.input_digests, k.config_digest, k.key, k.final
    if k.reusable and (final / RESULT_FILE).is_file():
        return _reused(final)

    layout.ensure()
    remove_dead_workdirs(layout.artifacts)
    work = new_workdir(final.parent, key)
    try:
        started = time.perf_counter()
        result = fn(config, input_paths, work)
        seconds = time.perf_counter() - started
        stopped = stop_requested()
        if stopped is not None:
            # a stop was asked while the stage ran, but its SignalStop never surfaced (raised inside a weakref
            # callback or finalizer, where Python only prints it): the stop still holds, the output is not published
            raise SignalStop(stopped)
        unknown = set(result.outputs) - set(spec.outputs)
        if unknown or set(spec.outputs) - set(result.outputs):
            raise RuntimeError(f"stage '{stage}' returned roles {sorted(result.outputs)}, declared {list(spec.outputs)}")
        rel = {}
        for role, path in result.outputs.items():
            p = Path(path).resolve()
            if not p.is_relative_to(work.resolve()):
                raise RuntimeError(f"stage '{stage}': output '{role}' ({p}) is outside its out_dir")
            rel[role] = p.relative_to(work.resolve())
        output_digests = {role: path_sha256(work / r) for role, r in rel.items()}
        record = StageRecord(
            stage=stage,
            config_digest=cdigest,
            config=config_to_dict(config),
            inputs={r: str(p) for r, p in input_paths.items()},
            input_digests=input_digests,
            outputs={role: str(final / r) for role, r in rel.items()},
            output_digests=output_digests,
            out_dir=str(final),
            metrics=_relocated(dict(result.metrics), work, final),
            seconds=round(seconds, 3),
            reused=False,
        )
        atomic_write_json(work / RESULT_FILE, record.to_json())
        try:
            publish_dir(work, final)  # fsynced: a finished folder survives a power loss
        except OSError:
            # Someone else finished the same run first. Their folder is what is there now, and a
            # stage's bytes need not repeat (timestamps, sampling): report the winner's record, never
            # ours, or the warehouse would hold digests of a folder that does not exist.
            if not (final / RESULT_FILE).is_file():
                raise
            shutil.rmtree(work, ignore_errors=True)
            release_workdir(work)
            return _reused(final)
        release_workdir(work)
        return record
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        release_workdir(work)
        raise

"""The bench `skillgate eval` takes without --bench is the newest bench-build output on record: a folder
once named by --bench (which an evaluation records as its bench) or by `inputs.bench=PATH` (recorded as a
stage run's input) never becomes the default of later commands. Recorded through the warehouse's own
recorders (a real DuckDB file)."""

from __future__ import annotations

from pathlib import Path

from deployments.cli.eval_inputs import newest_bench
from skillgate_core.agent.collect import CollectConfig
from skillgate_core.base.digests import path_sha256
from skillgate_core.benchgen.stage import BenchBuildConfig
from skillgate_core.ownership.records import utc_now
from skillgate_core.pipeline.run import StageRecord
from warehouse.events import DatasetVersion
from warehouse.recording import record
from warehouse.stage_runs import StageRunRecorder


def _bench(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "tasks.jsonl").write_text(f'{{"bench": "{folder.name}"}}\n')  # content of its own: its own digest
    return folder


def _stage_run(stage: str, config: object, *, inputs: dict[str, Path], outputs: dict[str, Path]) -> None:
    run = StageRunRecorder.start(stage, config, trigger="cli")
    run.finish(StageRecord(stage=stage, config_digest="0" * 64, config={}, inputs={r: str(p) for r, p in inputs.items()},
                           input_digests={r: path_sha256(p) for r, p in inputs.items()},
                           outputs={r: str(p) for r, p in outputs.items()},
                           output_digests={r: path_sha256(p) for r, p in outputs.items()}, out_dir=str(outputs and
                           next(iter(outputs.values())).parent), metrics={}, seconds=0.0, reused=False))


def test_only_a_bench_build_output_becomes_the_default_bench(skillgate_home, tmp_path):
    # an evaluation with --bench records the folder it used, and a stage run with inputs.bench=PATH its input
    mine = _bench(tmp_path / "my-bench")
    record(DatasetVersion(sha256=path_sha256(mine), uri=str(mine), dataset_kind="bench", created_at=utc_now()))
    other = _bench(tmp_path / "other-bench")
    ran = tmp_path / "collect-out" / "trajectories"
    ran.mkdir(parents=True)
    (ran / "t.jsonl").write_text("{}\n")
    _stage_run("collect", CollectConfig(), inputs={"bench": other}, outputs={"trajectories": ran})
    assert newest_bench() is None
    built = _bench(tmp_path / "bench-build-out" / "bench")  # a bench-build run's output folder
    _stage_run("bench-build", BenchBuildConfig(), inputs={}, outputs={"bench": built})
    found = newest_bench()
    assert found is not None and found[0] == built
    # a later --bench still does not displace it
    third = _bench(tmp_path / "third")
    record(DatasetVersion(sha256=path_sha256(third), uri=str(third), dataset_kind="bench", created_at=utc_now()))
    assert newest_bench()[0] == built  # type: ignore[index]

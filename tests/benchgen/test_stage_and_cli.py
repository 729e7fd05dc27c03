"""The bench-build stage: the pure function through run_stage (reuse by digest), as a Prefect
sub-flow on a real test server, and the `skillgate bench build / stats` commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.sandbox_fixtures import skip_without_bwrap
from support.skillgate_cli import run_skillgate
from typer.testing import CliRunner

from skillgate_core.base.config import config_to_dict
from skillgate_core.base.paths import state_layout
from skillgate_core.benchgen import BenchBuildConfig
from skillgate_core.envs.backends import available_backends
from skillgate_core.pipeline.run import run_stage
from skillgate_core.pipeline.stages import get_stage

MINI = BenchBuildConfig(seed=5, families=("diagnosis", "constraints"), domains=("scheduling", "service-config"),
                        train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=2, slate_tasks=2)


def test_stage_is_registered_and_runs_through_run_stage(skillgate_home: Path):
    spec = get_stage("bench-build")
    assert spec.built and spec.config_class() is BenchBuildConfig
    record = run_stage("bench-build", MINI, {}, state_layout())
    bench = Path(record.outputs["bench"])
    assert bench.is_relative_to(skillgate_home) and (bench / "suite.json").is_file()
    assert record.metrics["tasks"] == 8 and len(record.metrics["digest"]) == 64
    again = run_stage("bench-build", MINI, {}, state_layout())
    assert again.reused and again.outputs == record.outputs


def test_cli_build_then_task_check_on_every_family_then_stats(tmp_path: Path):
    """The issue's demonstration: `skillgate bench build`, then `skillgate task check` over a sample of
    every family (real bubblewrap sandboxes), all valid; then `skillgate bench stats`."""
    from deployments.cli import app

    runner = CliRunner()
    out = tmp_path / "suite"
    small = ["train_skills_per_cell=1", "train_tasks_per_skill=1", "eval_tasks=4", "slate_tasks=4"]
    result = runner.invoke(app, ["bench", "build", "--seed", "5", "--out", str(out), *small])
    assert result.exit_code == 0, result.output
    assert "digest" in result.output and "24 tasks" in result.output
    rows = [json.loads(x) for x in (out / "bench" / "tasks.jsonl").read_text().splitlines()]
    sample = [next(r for r in rows if r["family"] == f and r["split"] == s)
              for f, s in (("procedural", "train"), ("diagnosis", "eval70_v1"), ("constraints", "slate147"),
                           ("planning", "train"))]
    if not available_backends()["bwrap"]:
        check = runner.invoke(app, ["task", "check", "--backend", "bwrap", "--json",
                                    *(str(out / "bench" / r["path"]) for r in sample)])
        assert check.exit_code == 0, check.output
        verdicts = [json.loads(line) for line in check.output.splitlines() if line.startswith("{")]
        assert [v["verdict"] for v in verdicts] == ["valid"] * 4
    stats = runner.invoke(app, ["bench", "stats", str(out / "bench"), "--digest"])
    assert stats.exit_code == 0, stats.output
    assert "tasks per domain" in stats.output and "not run" in stats.output
    assert json.loads((out / "bench" / "suite.json").read_text())["seed"] == 5
    bad = runner.invoke(app, ["bench", "build", "--out", str(out), "train_tasks_per_skill=lots"])
    assert bad.exit_code != 0


@pytest.mark.usefixtures("prefect_server")
def test_stage_runs_as_a_prefect_sub_flow(skillgate_home: Path):
    from flows.stage_flows import STAGE_FLOWS

    result = STAGE_FLOWS["bench-build"](config=config_to_dict(MINI), inputs={})
    assert result["stage"] == "bench-build" and result["metrics"]["tasks"] == 8
    assert Path(result["outputs"]["bench"]).is_relative_to(skillgate_home)


def test_cli_build_shows_writing_and_gate_progress_on_stderr(tmp_path: Path):
    """The validity-gate phase of `bench build` is not silent: off a terminal, one line per phase."""
    skip_without_bwrap()  # the gate plays bubblewrap sandboxes
    mini = ['families=["diagnosis","constraints"]', 'domains=["scheduling","service-config"]',
            "train_skills_per_cell=1", "train_tasks_per_skill=1", "eval_tasks=2", "slate_tasks=2",
            "gate_sample_per_family=1"]
    done = run_skillgate("bench", "build", "--seed", "5", "--out", str(tmp_path / "suite"), "--gate", "sample", *mini,
                         home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert [re.sub(r"in \d+\.\d s", "in T s", line) for line in lines] == [
        "writing task packages: 8/8 tasks in T s", "validity gate: 6/6 tasks in T s"], done.stderr
    assert "validity gate (sample)" in done.stdout and "task packages" not in done.stdout

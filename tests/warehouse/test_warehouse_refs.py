"""warehouse.refs: every id, digest (or unique prefix) and output path a user has names one thing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.skillgate_cli import run_skillgate
from typer.testing import CliRunner
from wh_scenario import Scenario

from deployments.cli import app
from skillgate_core.base.config import config_digest
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.paths import StateLayout
from skillgate_core.pipeline.run import StageRecord
from skillgate_core.policy.tiny_model import TinyModelConfig
from warehouse import AmbiguousRef, RefMatch, StageRunRecorder, UnknownRef, read_connection, resolve_ref
from warehouse.refs import match_ref

runner = CliRunner()


def _two_output_run(state: StateLayout) -> tuple[str, StageRecord]:
    """A real recorded stage run (fresh run id, real config digest) whose folder holds two outputs."""
    out_dir = state.home / "artifacts" / "init-model" / "0123abcd"
    (out_dir / "model").mkdir(parents=True)
    (out_dir / "model" / "config.json").write_text('{"model_type": "qwen2"}')
    (out_dir / "report.md").write_text("# tiny\n")
    outputs = {"base_model": out_dir / "model", "report": out_dir / "report.md"}
    rec = StageRecord(stage="init-model", config_digest=config_digest(TinyModelConfig()), config={}, inputs={},
                      input_digests={}, outputs={r: str(p) for r, p in outputs.items()},
                      output_digests={r: path_sha256(p) for r, p in outputs.items()}, out_dir=str(out_dir),
                      metrics={}, seconds=0.1, reused=False)
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="test", state=state)
    run.finish(rec)
    return run.run_id, rec


def _one(state: StateLayout, text: str) -> RefMatch:
    return resolve_ref(state, text)


def test_what_a_stage_run_prints_resolves_by_id_digest_prefix_and_path(state: StateLayout, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    run_id, rec = _two_output_run(state)
    assert _one(state, run_id) == RefMatch("run", run_id, None, "id", "init-model run, completed")
    assert _one(state, run_id[:-2]).id == run_id  # a unique prefix of a run id
    model_sha = rec.output_digests["base_model"]
    for text in (model_sha, model_sha[:6], model_sha[:10].upper(), f"sha256:{model_sha[:8]}"):
        match = _one(state, text)
        assert (match.kind, match.id, match.uri) == ("dataset", model_sha, rec.outputs["base_model"]), text
    assert _one(state, model_sha[:6]).via == "prefix" and _one(state, model_sha).via == "id"
    cdigest = config_digest(TinyModelConfig())
    assert (_one(state, cdigest[:7]).kind, _one(state, cdigest[:7]).id) == ("config", cdigest)
    # paths: an output, a file inside it, the run's folder (two outputs of one run -> the run)
    assert _one(state, rec.outputs["report"]).id == rec.output_digests["report"]
    inside = _one(state, str(Path(rec.outputs["base_model"]) / "config.json"))
    assert (inside.kind, inside.id, inside.via) == ("dataset", model_sha, "path")
    folder = _one(state, rec.out_dir + "/")
    assert (folder.kind, folder.id, folder.via) == ("run", run_id, "path")
    # relative to the state dir, from any cwd
    monkeypatch.chdir(tmp_path)
    assert _one(state, "artifacts/init-model/0123abcd/model").id == model_sha
    # an unrecorded copy of a file is found by its content digest (a folder only under the state dir)
    copy = tmp_path / "copy-of-report.md"
    shutil.copy(rec.outputs["report"], copy)
    assert (_one(state, str(copy)).id, _one(state, str(copy)).via) == (rec.output_digests["report"], "content")
    shutil.copytree(rec.outputs["base_model"], tmp_path / "model-copy")
    with pytest.raises(UnknownRef):
        _one(state, str(tmp_path / "model-copy"))


def test_owned_ids_resolve_and_an_exact_id_beats_longer_ones(scenario: Scenario):
    st = scenario.state
    assert _one(st, "exp-1").kind == "experiment"
    assert (_one(st, "exp-1/step-2").kind, _one(st, "exp-1/step-2").id) == ("export", "exp-1/step-20")
    # the evaluation id is also a prefix of its metric ids: the exact id wins
    assert (_one(st, scenario.eval_id).kind, _one(st, scenario.eval_id).via) == ("evaluation", "id")
    assert _one(st, "exp-1/eval70-step-20/pass").id == "exp-1/eval70-step-20/pass_at_4"
    assert _one(st, "prep").id == "prep-1"
    # an export's folder is its export (not only its weights' dataset), also from a file inside it
    export_dir = scenario.root / "exp-1" / "model" / "exports" / "step-10"
    assert (_one(st, str(export_dir)).kind, _one(st, str(export_dir)).id) == ("export", "exp-1/step-10")
    assert _one(st, str(export_dir / "config.json")).id == "exp-1/step-10"
    assert _one(st, scenario.export_shas["step-10"][:8]).kind == "dataset"  # by digest: the weights


def test_ambiguous_and_unknown_references_say_what_to_do(scenario: Scenario):
    with pytest.raises(AmbiguousRef) as amb:
        _one(scenario.state, "grpo-")
    assert {(c.kind, c.id) for c in amb.value.candidates} == {("run", "grpo-1"), ("run", "grpo-2")}
    assert "'grpo-' matches 2 things" in str(amb.value) and "run grpo-1 (grpo run, failed)" in str(amb.value)
    assert _one(scenario.state, "exp-1/eval70-step-20/trial_success").kind == "metric"  # exact, though a prefix too
    with pytest.raises(AmbiguousRef, match="trial_success@procedural"):
        _one(scenario.state, "exp-1/eval70-step-20/trial")
    with pytest.raises(UnknownRef) as unknown:
        _one(scenario.state, "nothing-like-this")
    for kind in ("run ids", "experiment ids", "metric ids", "config digests", "output paths"):
        assert kind in str(unknown.value)
    with pytest.raises(UnknownRef, match="at least 6 characters"):
        _one(scenario.state, scenario.bench_sha[:5])


def test_the_lineage_command_takes_any_reference(scenario: Scenario):
    res = runner.invoke(app, ["lineage", scenario.rl_sha[:8]])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert f"dataset {scenario.rl_sha}" in out and "run prep-1" in out and f"dataset {scenario.bench_sha}" in out
    with read_connection(scenario.state) as con:
        grpo_config = con.execute("select config_digest from run where run_id = 'grpo-2'").fetchone()[0]
        assert match_ref(con, grpo_config[:6], scenario.state).kind == "config"
    res = runner.invoke(app, ["lineage", grpo_config[:6], "--json"])
    tree = json.loads(res.output)
    assert tree["kind"] == "config" and sorted(c["id"] for c in tree["children"]) == ["grpo-1", "grpo-2"]
    res = runner.invoke(app, ["lineage", str(scenario.state.home / "artifacts" / "rl-data-prep" / "k1")])
    assert res.exit_code == 0 and "run prep-1" in " ".join(res.output.split()), res.output
    res = runner.invoke(app, ["lineage", "grpo-"])
    assert res.exit_code == 1 and "matches 2 things" in res.output and "run grpo-2" in res.output
    res = runner.invoke(app, ["lineage", "exp-1/nothing"])
    assert res.exit_code == 1 and "nothing in the warehouse matches 'exp-1/nothing'" in res.output


def test_an_unknown_reference_is_one_message_not_a_traceback(scenario: Scenario):
    """Commands that take a reference outside `lineage` (traj show) let RefError reach main(): errors.py."""
    done = run_skillgate("traj", "show", "grpo-", home=scenario.state.home)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: 'grpo-' matches 2 things") and "run grpo-1" in done.stderr


def test_an_evaluation_or_export_named_as_experiments_lists_it_resolves(scenario: Scenario):
    """`skillgate experiments` shows an evaluation's name in its experiment's row; that name alone is a
    reference (`traj show NAME`, `lineage NAME`) while one experiment has it."""
    st = scenario.state
    bare_eval = scenario.eval_id.split("/", 1)[1]
    found = _one(st, bare_eval)
    assert (found.kind, found.id) == ("evaluation", scenario.eval_id)
    assert (_one(st, "step-10").kind, _one(st, "step-10").id) == ("export", "exp-1/step-10")
    res = runner.invoke(app, ["lineage", bare_eval], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and scenario.eval_id in res.output, res.output

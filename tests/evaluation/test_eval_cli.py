"""`skillgate eval run` / `skillgate eval protocol` as a user runs them (a real subprocess of this checkout), and
the export-id look-up behind --policy in process."""

from __future__ import annotations

import pytest
from support.skillgate_cli import run_skillgate

pytestmark = pytest.mark.usefixtures("bwrap_ready")


def test_eval_protocol_shows_the_fingerprint(tmp_path, bench):
    shown = run_skillgate("eval", "protocol", "slate147", "--bench", str(bench), home=tmp_path / "home")
    assert shown.returncode == 0, shown.stderr
    assert "slate147__mixed__r4__" in shown.stdout and "fingerprint" in shown.stdout
    assert "the bench holds 4 of the 147 slate147 tasks" in shown.stdout


def _nothing_recorded(home) -> bool:
    """No experiment folder, and no warehouse (or one without an experiment or evaluation row)."""
    import duckdb

    if (home / "experiments").exists() and any((home / "experiments").iterdir()):
        return False
    if not (home / "warehouse.duckdb").exists():
        return True
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute("select (select count(*) from experiment) + (select count(*) from evaluation)").fetchone() == (0,)


def test_refused_endpoint_arguments_leave_nothing_behind(tmp_path, bench):
    home = tmp_path / "home"
    not_a_tokenizer = tmp_path / "empty"
    not_a_tokenizer.mkdir()
    for extra, hint, why in (([], "--model", "served model's name"),
                             (["--model", "m", "--tokenizer", str(not_a_tokenizer)], "--tokenizer", "not a tokenizer folder"),
                             (["--model", "m", "--request-timeout", "0"], "--request-timeout", "")):
        done = run_skillgate("eval", "run", "--policy", "http://127.0.0.1:9/v1", "--bench", str(bench), *extra,
                             home=home)
        out = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 2 and hint in out and why in out, out
        assert "Traceback" not in out
    assert _nothing_recorded(home)


def test_eval_run_stops_resumes_by_export_id_with_the_newest_bench_and_prints_metrics_and_logs(
        tmp_path, tiny_model_dir, bench, tiny_spec):
    """One user's session in one state dir: each `eval run` that plays trials is a process that loads torch and
    the model (~6 s), so the stopped run, its resume by export id and the labelled demo run serve every check."""
    home = tmp_path / "home"
    unknown = run_skillgate("eval", "run", "--policy", "no-such-export", "--protocol", str(tiny_spec), home=home)
    out = " ".join((unknown.stdout + unknown.stderr).split())
    assert unknown.returncode == 2 and "--policy" in out and "no-such-export: no such folder" in out, out
    assert _nothing_recorded(home) and not (home / "warehouse.duckdb").exists()
    args = ["eval", "run", "--protocol", str(tiny_spec), "--batch", "2"]
    model = ["--policy", str(tiny_model_dir), "--bench", str(bench)]
    stopped = run_skillgate(*args, *model, "--max-trials", "2", home=home)
    assert stopped.returncode == 1, stopped.stderr
    assert "status incomplete: 2/4 trials (2 run now)" in stopped.stdout and "resume" in stopped.stdout
    assert "standalone evaluation experiment standalone-eval-" in stopped.stdout
    (export,) = (home / "experiments").glob("standalone-eval-*/model/exports/model-*")
    experiment_id, name = export.parents[2].name, export.name
    listed = run_skillgate("experiments", home=home)
    assert name in listed.stdout
    # a --bench given once is not the default of later commands (only a bench-build output is on record)
    later = run_skillgate("eval", "protocol", str(tiny_spec), home=home)
    assert later.returncode != 0 and "no bench here" in later.stderr and str(bench) not in later.stdout, later.stdout
    # the export id as `skillgate experiments` prints it (its other spellings: the in-process test below): the
    # same evaluation resumes and plays the missing trials
    done = run_skillgate(*args, "--policy", name, "--bench", str(bench), home=home)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"-> experiment {experiment_id}, export {name}" in " ".join(out.split()), out
    assert "status completed: 4/4 trials (2 run now)" in out
    for needle in ("trial success", "pass@2", "errors (in the denominator)", "clean oracle rate", "read rate"):
        assert needle in out, needle
    assert "per-trial logs: " in out and "/rows/ROW_ID/{row.json,trajectory.json}" in out
    assert "eval_trials.parquet" in out
    assert len(list((home / "experiments").iterdir())) == 1  # the same experiment
    demo = run_skillgate(*args, *model, "--repeats", "1", home=home)
    assert demo.returncode == 0 and "labelled non-protocol run" in demo.stdout and "__r1__" in demo.stdout
    pinned = run_skillgate(*args, *model, "--pin", "tiny_v1__mixed__r2__0000000000", home=home)
    assert pinned.returncode == 2 and "fingerprint 0000000000" in pinned.stderr and "refusing" in pinned.stderr
    wrong_kind = run_skillgate("eval", "run", "--policy", experiment_id, "--protocol", str(tiny_spec), home=home)
    out = " ".join((wrong_kind.stdout + wrong_kind.stderr).split())
    assert wrong_kind.returncode == 2 and f"names experiment {experiment_id}, not an export" in out, out
    assert f"its exports: {experiment_id}/{name}" in out


def test_an_export_id_is_found_by_name_by_experiment_and_name_and_by_a_prefix(skillgate_home):
    """What --policy looks up (deployments.cli.eval_inputs), in process: each spelling `skillgate experiments` and
    `skillgate lineage` print names the export's folder; anything else is refused saying what it names. The CLI
    test above resumes an evaluation through one spelling (each one there is a model load of ~6 s)."""
    from fake_export import write_fake_model

    from deployments.cli.eval_inputs import PolicyNotFound, policy_of_export_id
    from skillgate_core.base.paths import state_layout
    from skillgate_core.ownership import build_export, create_experiment, finish_segment, start_segment
    from warehouse.evaluations import ensure_export_recorded

    root = state_layout().experiments
    with pytest.raises(PolicyNotFound, match="no warehouse under"):
        policy_of_export_id("step-7")
    create_experiment(root, "exp-a", algorithm="grpo:test", data="d", init="i", hypothesis="h")
    start_segment(root, "seg-a", experiment_id="exp-a")
    export = build_export(root, "exp-a", "step-00000007", run_name="seg-a", step=7, write=write_fake_model)
    finish_segment(root, "exp-a", "seg-a", "completed")
    ensure_export_recorded(root, "exp-a", "step-00000007")
    for spelling in ("step-00000007", "exp-a/step-00000007", "exp-a/step-0000"):
        assert policy_of_export_id(spelling) == (str(export.path), ""), spelling
    with pytest.raises(PolicyNotFound, match="names experiment exp-a, not an export; its exports: exp-a/step-00000007"):
        policy_of_export_id("exp-a")
    with pytest.raises(PolicyNotFound, match="no-such-export: no such folder, not an http"):
        policy_of_export_id("no-such-export")


def test_a_folder_without_weights_is_refused_before_anything_is_written(tmp_path, bench, tiny_spec):
    """A model folder with config.json and no safetensors: `eval run` refuses it before creating the standalone
    experiment (`warehouse verify` finds no drift after), and `eval probe` says what is wrong, no traceback."""
    home = tmp_path / "home"
    folder = tmp_path / "no-weights"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    for command in ("run", "probe"):
        done = run_skillgate("eval", command, "--policy", str(folder), "--protocol", str(tiny_spec), "--bench",
                             str(bench), home=home)
        out = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 2 and "--policy" in out and "no weights" in out, out
        assert "Traceback" not in out
    assert _nothing_recorded(home)
    verified = run_skillgate("warehouse", "verify", home=home)
    assert verified.returncode == 0 and "missing-in-warehouse" not in verified.stdout, verified.stdout + verified.stderr

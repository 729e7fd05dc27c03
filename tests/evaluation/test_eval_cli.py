"""`skillgate eval run` / `skillgate eval protocol` as a user runs them (a real subprocess of this checkout)."""

from __future__ import annotations

import pytest
from support.skillgate_cli import run_skillgate

pytestmark = pytest.mark.usefixtures("bwrap_ready")


def test_eval_run_prints_metrics_and_where_the_logs_are_and_resumes(tmp_path, tiny_model_dir, bench, tiny_spec):
    home = tmp_path / "home"
    args = ["eval", "run", "--policy", str(tiny_model_dir), "--protocol", str(tiny_spec), "--bench", str(bench),
            "--batch", "2"]
    stopped = run_skillgate(*args, "--max-trials", "2", home=home)
    assert stopped.returncode == 1, stopped.stderr
    assert "status incomplete: 2/4 trials (2 run now)" in stopped.stdout and "resume" in stopped.stdout
    assert "standalone evaluation experiment standalone-eval-" in stopped.stdout
    done = run_skillgate(*args, home=home)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "status completed: 4/4 trials (2 run now)" in out
    for needle in ("trial success", "pass@2", "errors (in the denominator)", "clean oracle rate", "read rate"):
        assert needle in out, needle
    assert "per-trial logs: " in out and "/rows/ROW_ID/{row.json,trajectory.json}" in out
    assert "eval_trials.parquet" in out
    demo = run_skillgate(*args, "--repeats", "1", home=home)
    assert demo.returncode == 0 and "labelled non-protocol run" in demo.stdout and "__r1__" in demo.stdout
    pinned = run_skillgate(*args, "--pin", "tiny_v1__mixed__r2__0000000000", home=home)
    assert pinned.returncode == 2 and "fingerprint 0000000000" in pinned.stderr and "refusing" in pinned.stderr


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


def test_policy_takes_an_export_id_and_bench_defaults_to_the_newest_on_record(tmp_path, tiny_model_dir, bench,
                                                                            tiny_spec):
    home = tmp_path / "home"
    unknown = run_skillgate("eval", "run", "--policy", "no-such-export", "--protocol", str(tiny_spec), home=home)
    out = " ".join((unknown.stdout + unknown.stderr).split())
    assert unknown.returncode == 2 and "--policy" in out and "no-such-export: no such folder" in out, out
    assert _nothing_recorded(home) and not (home / "warehouse.duckdb").exists()
    first = run_skillgate("eval", "run", "--policy", str(tiny_model_dir), "--protocol", str(tiny_spec), "--bench",
                          str(bench), "--max-trials", "1", "--batch", "1", home=home)
    assert first.returncode == 1 and "status incomplete: 1/4" in first.stdout, first.stdout + first.stderr
    (export,) = (home / "experiments").glob("standalone-eval-*/model/exports/model-*")
    experiment_id, name = export.parents[2].name, export.name
    listed = run_skillgate("experiments", home=home)
    assert name in listed.stdout
    for done, policy in enumerate((name, f"{experiment_id}/{name}", f"{experiment_id}/{name[:8]}"), start=2):
        # the export id as `skillgate experiments` / `skillgate lineage` print it (or a unique prefix); no --bench:
        # the same evaluation resumes, one more trial each time
        again = run_skillgate("eval", "run", "--policy", policy, "--protocol", str(tiny_spec), "--max-trials", "1",
                              "--batch", "1", home=home)
        out = " ".join(again.stdout.split())
        assert f"bench {bench} (the newest on record" in out, out + again.stderr
        assert f"-> experiment {experiment_id}, export {name}" in out and f"{done}/4 trials (1 run now)" in out, out
        assert again.returncode == (0 if done == 4 else 1)
    assert len(list((home / "experiments").iterdir())) == 1  # the same experiment each time
    wrong_kind = run_skillgate("eval", "run", "--policy", experiment_id, "--protocol", str(tiny_spec), home=home)
    out = " ".join((wrong_kind.stdout + wrong_kind.stderr).split())
    assert wrong_kind.returncode == 2 and f"names experiment {experiment_id}, not an export" in out, out
    assert f"its exports: {experiment_id}/{name}" in out

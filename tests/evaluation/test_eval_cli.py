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


def test_an_endpoint_without_model_or_tokenizer_is_refused_leaving_nothing_behind(tmp_path, bench):
    home = tmp_path / "home"
    for extra, hint in (([], "--model"), (["--model", "m"], "--tokenizer")):
        done = run_skillgate("eval", "run", "--policy", "http://127.0.0.1:9/v1", "--bench", str(bench), *extra,
                             home=home)
        assert done.returncode == 2 and hint in done.stdout + done.stderr, done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr
    assert not (home / "experiments").exists() or not any((home / "experiments").iterdir())

"""The `skillgate` command line, run as a real subprocess (the console script users run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SKILLGATE = shutil.which("skillgate", path=str(Path(sys.executable).parent)) or "skillgate"


def run_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SKILLGATE_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run([SKILLGATE, *args], capture_output=True, text=True, env=env, timeout=300)


def test_doctor_on_this_machine(tmp_path):
    proc = run_cli("doctor", home=tmp_path)
    out = proc.stdout
    for row in ("python", "package prefect", "package deepspeed", "torch device", "docker daemon",
                "bubblewrap", "prefect api", "warehouse", "free disk"):
        assert row in out, f"doctor lacks row {row!r}:\n{out}"
    # Every package the project depends on is installed in this venv, and bwrap works here.
    assert "not installed" not in out
    fails = [line for line in out.splitlines() if " fail " in line]
    assert proc.returncode == (1 if fails else 0), out
    assert proc.returncode == 0, f"doctor found failures on the test machine:\n{out}"


def test_doctor_reports_a_broken_prefect_api_with_a_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    proc = run_cli("doctor", home=tmp_path)
    assert proc.returncode == 1
    assert "prefect api" in proc.stdout and "infra/prefect_server.sh" in proc.stdout


def test_recipes_show_and_dry_run(tmp_path):
    recipes = run_cli("recipes", home=tmp_path)
    assert recipes.returncode == 0 and "demo" in recipes.stdout and "init-model" in recipes.stdout
    show = run_cli("show", "demo", "init-model.seed=3", home=tmp_path)
    assert show.returncode == 0 and "InitModelConfig" in show.stdout and "digest" in show.stdout
    dry = run_cli("run", "demo", home=tmp_path)
    assert dry.returncode == 0 and "dry run" in dry.stdout and "paper-tables" in dry.stdout
    assert "not built yet" not in dry.stdout  # every stage of the demo is built
    assert not (tmp_path / "artifacts").exists(), "a dry run must not write stage outputs"


def test_bad_override_is_one_clear_error_and_exit_2(tmp_path):
    proc = run_cli("run", "demo", "init-model.hidden_size=wide", home=tmp_path)
    assert proc.returncode == 2
    assert "init-model.hidden_size: expected int, got str 'wide'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("show", "no-such-recipe", home=tmp_path)
    assert proc.returncode == 2 and "no recipe named 'no-such-recipe'" in proc.stderr


@pytest.mark.parametrize("name", ["skillgate_core", "skillgate_core.pipeline.recipes", "skillgate_core.pipeline.run"])
def test_core_never_imports_prefect_or_warehouse(name):
    code = f"import sys, {name}; bad = [m for m in ('prefect', 'warehouse') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_execute_writes_only_under_skillgate_home(tmp_path):
    """`skillgate run --execute` through the embedded Prefect server leaves ~ and the cwd untouched."""
    fake_home, cwd, state = tmp_path / "user-home", tmp_path / "cwd", tmp_path / "state"
    fake_home.mkdir()
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "HF_", "XDG_", "TORCH_", "TRITON_", "MPL"))}
    env.update(HOME=str(fake_home), SKILLGATE_HOME=str(state), COLUMNS="200")
    proc = subprocess.run(
        [SKILLGATE, "run", "init-model", "--execute", "init-model.corpus_lines=300", "init-model.vocab_size=600"],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "completed" in proc.stdout
    assert list(fake_home.rglob("*")) == [], "something was written to ~"
    assert list(cwd.rglob("*")) == [], "something was written to the working directory"
    assert (state / "prefect").is_dir() and any((state / "artifacts" / "init-model").iterdir())
    # the run id it prints is one `skillgate lineage` and the warehouse know (orchestration 5)
    [run_id] = re.findall(r"init-model-\d{8}T\d{6}-[0-9a-f]{6}", proc.stdout)
    sql = subprocess.run([SKILLGATE, "sql", f"select stage from run where run_id = '{run_id}'", "--format", "csv"],
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    assert sql.stdout.split() == ["stage", "init-model"], sql.stdout + sql.stderr

    # the same run again: every stage has a finished identical run, so no Prefect server starts
    started = time.monotonic()
    again = subprocess.run(
        [SKILLGATE, "run", "init-model", "--execute", "init-model.corpus_lines=300", "init-model.vocab_size=600"],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=600,
    )
    took = time.monotonic() - started
    assert again.returncode == 0 and "up to date" in again.stdout and "reused" in again.stdout, again.stdout
    assert "Starting temporary server" not in again.stdout + again.stderr
    assert took < 15, f"an all-reused run took {took:.1f} s"


def test_recipes_never_truncates_a_name(tmp_path):
    # At 140 columns (and narrower) the long rl.<profile> names were cut to "rl.selector-clean-or…":
    # a name is what the user types next, so the description wraps instead.
    from deployments import RECIPES_DIR

    names = sorted(p.stem for p in RECIPES_DIR.glob("*.toml"))
    env = {**os.environ, "SKILLGATE_HOME": str(tmp_path), "COLUMNS": "100"}
    out = subprocess.run([SKILLGATE, "recipes"], capture_output=True, text=True, env=env, timeout=300).stdout
    missing = [n for n in names if not re.search(rf"(^|\s){re.escape(n)}(\s|$)", out, re.MULTILINE)]
    assert not missing, f"names not printed whole: {missing}\n{out}"

"""The state dir never depends on the current directory (orchestration problem 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import skillgate_core
from skillgate_core.base.paths import default_home, state_layout

REPO = Path(skillgate_core.__file__).resolve().parent.parent


def test_default_home_is_the_checkout_not_the_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("SKILLGATE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    home, rule = default_home()
    assert home == REPO / ".skillgate" and rule == "source checkout"
    assert state_layout().home == home
    assert not (tmp_path / ".skillgate").exists()


def test_env_wins_and_where_prints_it_from_any_directory(tmp_path):
    env = {**os.environ, "SKILLGATE_HOME": str(tmp_path / "state")}
    out = subprocess.run([sys.executable, "-c", "from deployments.cli import main; main()", "where"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == str(tmp_path / "state")
    assert "SKILLGATE_HOME" in out.stderr
    env.pop("SKILLGATE_HOME")
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    out = subprocess.run([sys.executable, "-c", "from deployments.cli import main; main()", "where"],
                         cwd=sub, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == str(REPO / ".skillgate")
    assert not (sub / ".skillgate").exists()

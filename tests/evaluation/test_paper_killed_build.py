"""A `paper build` killed outright (SIGKILL) midway leaves its --out as it was: the build happens in a temp
folder beside it and is renamed into place whole, so an earlier build stays readable, and the next build
neither refuses the folder nor trips over the dead build's temp folder (which it removes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from paper_rows import write_synthetic_evals
from support.skillgate_cli import REPO, run_skillgate

# the real CLI, held still at its first table write (after the figures) until it is killed
KILLED_MIDWAY = """
import sys, time
import skillgate_core.evaluation.paper as paper

real = paper.atomic_write_text

def stall(path, text):
    real(path, text)
    print("writing", flush=True)
    time.sleep(600)

paper.atomic_write_text = stall
sys.argv = ["skillgate", *sys.argv[1:]]
from deployments.cli import main
main()
"""


def test_a_killed_build_blocks_nothing(tmp_path):
    rows, out, home = tmp_path / "rows", tmp_path / "paper", tmp_path / "home"
    write_synthetic_evals(rows)
    first = run_skillgate("paper", "build", str(rows), "--out", str(out), home=home)
    assert first.returncode == 0, first.stderr
    before = (out / "paper.json").read_bytes()

    env = {**os.environ, "SKILLGATE_HOME": str(home), "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", KILLED_MIDWAY, "paper", "build", str(rows), "--out", str(out),
                              "bootstrap_seed=7"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "writing", child.stderr
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    # the earlier build is whole, untouched
    assert (out / "paper.json").read_bytes() == before and (out / "report.md").is_file()

    again = run_skillgate("paper", "build", str(rows), "--out", str(out), "bootstrap_seed=7", home=home)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "paper.json").read_text())["config"]["bootstrap_seed"] == 7
    # no temp folder left (the state home is made only when a command needs it)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == ["paper", "rows"]
    # a folder that is neither empty nor a paper build is still refused, and left as it was
    other = tmp_path / "other"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    refused = run_skillgate("paper", "build", str(rows), "--out", str(other), home=home)
    assert refused.returncode == 2 and "not an earlier paper build" in refused.stderr
    assert [p.name for p in other.iterdir()] == ["mine.txt"]


def test_a_new_or_empty_folder_is_built(tmp_path):
    rows = tmp_path / "rows"
    write_synthetic_evals(rows)
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (empty, tmp_path / "a" / "new"):
        done = run_skillgate("paper", "build", str(rows), "--out", str(out), home=tmp_path / "home")
        assert done.returncode == 0 and (out / "paper.json").is_file(), done.stderr
    assert Path(tmp_path / "a").is_dir() and [p.name for p in (tmp_path / "a").iterdir()] == ["new"]

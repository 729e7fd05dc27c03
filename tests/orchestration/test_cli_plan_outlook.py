"""The dry-run plan says, per stage, whether its output is on record (reused) or will be computed and
why, and which stages an override makes recompute; it reads the state dir and writes nothing."""

from __future__ import annotations

import os
import re
import subprocess

from deployments import RECIPES_DIR
from skillgate_core.base.paths import state_layout
from skillgate_core.pipeline.recipes import find_recipe, resolve_recipe
from skillgate_core.pipeline.run import run_stage
from tests.orchestration.test_cli import SKILLGATE


def _plan(*args: str, home) -> tuple[dict[str, str], str]:
    """(entry -> its row's text, the whole output) of `skillgate run ARGS` (a dry run)."""
    env = {**os.environ, "SKILLGATE_HOME": str(home), "COLUMNS": "400"}
    proc = subprocess.run([SKILLGATE, "run", *args], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {m.group(1): m.group(0) for m in re.finditer(r"│ \d+ +│ (\S+) .*", proc.stdout)}
    return rows, proc.stdout


def test_the_plan_says_what_is_reused_and_what_an_override_makes_recompute(tmp_path):
    home = tmp_path / "home"
    demo = resolve_recipe(find_recipe("demo", RECIPES_DIR))
    run_stage("init-model", demo.configs["init-model"], {}, state_layout(home))  # the demo's init-model, on record
    before = sorted(p.relative_to(home) for p in home.rglob("*"))

    rows, whole = _plan("demo", "--until", "sft", home=home)
    assert list(rows) == ["init-model", "bench-build", "collect", "sft"]
    # no "code" column saying "built" on every row (it read as "output built", next to "will compute")
    assert not any("built" in r for r in rows.values()) and "┃ code ┃" not in whole
    assert "on record: reused" in rows["init-model"]
    assert "will compute (no finished run with this config on these inputs)" in rows["bench-build"]
    assert "will compute (reads what bench-build, init-model will compute)" not in rows["collect"]
    assert "will compute (reads what bench-build will compute)" in rows["collect"]

    rows, out = _plan("demo", "--until", "sft", "init-model.hidden_size=128", home=home)
    assert "will compute (config changed by init-model.hidden_size=128)" in rows["init-model"]
    assert ("init-model.hidden_size=128 changes init-model's config: init-model computes anew; downstream, "
            "2 more recompute: collect, sft") in out
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before, "a dry run wrote to the state dir"

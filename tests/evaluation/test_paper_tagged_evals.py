"""`skillgate paper build .skillgate/experiments` after a nightly: the nightly's tagged evaluation of
the same export under the same protocol is left out (and listed), not a refusal "trial ... appears
twice"; `exclude_tags=[]` keeps it, and the refusal then says how to leave it out."""

from __future__ import annotations

import json

import pytest
from support.skillgate_cli import run_skillgate

from skillgate_core.base.paths import state_layout
from skillgate_core.evaluation.nightly import nightly_tag
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec

pytestmark = pytest.mark.usefixtures("bwrap_ready")


def test_a_nightly_evaluation_is_left_out_of_the_paper_build(skillgate_home, tiny_model_dir, bench, tiny_spec,
                                                             tmp_path):
    resolved = build_protocol(load_spec(tiny_spec), bench)
    ref = resolve_policy(str(tiny_model_dir), root=state_layout().experiments)
    fast = EvalRunConfig(batch_episodes=4, sandbox_workers=2, cpu_threads=1)
    first = run_evaluation(resolved, ref, fast, progress=False)
    tag = nightly_tag("2026-01-01")
    nightly = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, sandbox_workers=2, cpu_threads=1, tag=tag),
                             progress=False)
    assert first.status == nightly.status == "completed" and first.eval_id != nightly.eval_id
    experiments = state_layout().experiments

    built = run_skillgate("paper", "build", str(experiments), "--out", str(tmp_path / "paper"), home=skillgate_home)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "left out 1 tagged evaluation(s)" in built.stdout and f"(tag {tag})" in built.stdout, built.stdout
    doc = json.loads((tmp_path / "paper" / "paper.json").read_text())
    assert [e["tag"] for e in doc["inputs"]["left_out"]] == [tag]
    assert [e["source"].split("/")[-2] for e in doc["inputs"]["eval_rows"]] == [first.eval_id]

    kept = run_skillgate("paper", "build", str(experiments), "--out", str(tmp_path / "all"), "exclude_tags=[]",
                         home=skillgate_home)
    assert kept.returncode == 2, kept.stdout + kept.stderr
    assert "appears twice" in kept.stderr and "exclude_tags" in kept.stderr, kept.stderr

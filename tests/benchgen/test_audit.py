"""The shortcut audit: ties count fractionally (so names that tell nothing score chance exactly), a balanced
suite passes with every name predictor at chance, a planted suffix or position leak fails the build and
`skillgate bench audit`, and audit.json stays out of the suite digest."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillgate_core.benchgen import BenchBuildConfig, build_bench, build_suite, skill_plan, suite_digest
from skillgate_core.benchgen.audit import AuditError, audit_bench, audit_tasks, load_audit_tasks
from skillgate_core.benchgen.audit_predictors import PREDICTORS
from skillgate_core.benchgen.choice_model import Choice, expected_accuracy, fit_choices

BALANCED = BenchBuildConfig(seed=3, families=("constraints", "planning"), domains=("scheduling", "data-formats"),
                            train_skills_per_cell=6, train_tasks_per_skill=1, eval_tasks=4, slate_tasks=4)
"""Six held-in skills per cell (every suffix once per cell; the two families share `-planner`): 40 tasks."""
LEAKY = BenchBuildConfig(seed=11, families=("procedural", "planning"), domains=("scheduling", "data-formats"),
                         train_skills_per_cell=1, train_tasks_per_skill=1, eval_skills_per_cell=2, eval_tasks=8,
                         slate_skills_per_cell=2, slate_tasks=8)
"""A small suite the leak tests plant a shortcut in (20 tasks; 4 training skills, 8 per held-out split)."""


def choice(answer: int, *tokens: str) -> Choice:
    return Choice(candidates=tuple(frozenset({t}) for t in tokens), answer=answer)


def test_ties_count_fractionally_so_uninformative_tokens_score_exactly_chance():
    suffixes = ("a", "b", "c", "d", "e", "f")
    balanced = [choice(k, *suffixes) for k in range(6)] * 3  # every suffix the answer equally often
    model = fit_choices(balanced)
    assert [expected_accuracy(model, c) for c in balanced] == [1 / 6] * 18
    # one suffix the answer more often: the model picks it, whole hits on its choices and none elsewhere
    skewed = balanced + [choice(0, *suffixes)]
    model = fit_choices(skewed)
    assert [expected_accuracy(model, c) for c in balanced[:6]] == [1.0, 0, 0, 0, 0, 0]
    # two suffixes tied at the top: half a hit for each
    model = fit_choices(balanced + [choice(0, *suffixes), choice(1, *suffixes)])
    assert [expected_accuracy(model, c) for c in balanced[:3]] == [0.5, 0.5, 0]
    # a suffix offered twice as often with the same answer rate ties too (no smoothing toward the base)
    wide = [choice(k, *suffixes) for k in range(6)] + [choice(k, "p", "q", "r", "s", "t", "f") for k in range(6)]
    assert [expected_accuracy(fit_choices(wide), c) for c in wide] == [1 / 6] * 12


@pytest.fixture(scope="module")
def balanced_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bench(BALANCED, {}, tmp_path_factory.mktemp("balanced")).outputs["bench"]


def test_a_balanced_suite_passes_with_every_name_predictor_exactly_at_chance(balanced_suite: Path):
    report = json.loads((balanced_suite / "audit.json").read_text())
    assert report["passed"] and report["failures"] == [] and report["suite_digest"] == suite_digest(balanced_suite)
    assert set(report["predictors"]) == set(PREDICTORS) and set(report["splits"]) == {"train", "eval70_v1", "slate147"}
    for name, predictor in report["predictors"].items():
        if predictor["kind"] == "name":
            assert predictor["train_in_sample"] == pytest.approx(1 / 6, abs=1e-6), name
            for split, r in predictor["splits"].items():
                if name.startswith("name.") or split == "train":  # slate.naive_bayes: slate-wide rates (below)
                    assert r["accuracy"] == pytest.approx(1 / 6, abs=1e-6) == r["bar"], (name, split)
    slate = report["predictors"]["slate.group_suffix"]["splits"]["eval70_v1"]
    assert slate["chance"] == 0.0625 and slate["cluster_chance"] == pytest.approx(1 / 6, abs=1e-6)
    assert slate["bar"] == slate["cluster_chance"]  # a name over the slate is held to the cluster-level chance
    index = report["predictors"]["position.slate_index"]["splits"]["train"]
    assert index["bar"] == pytest.approx(1 / 16) and index["units"] == index["tasks"] == 24
    assert report["predictors"]["name.suffix"]["splits"]["train"]["units"] == 24  # skills, not tasks
    balance = report["suffix_balance"]["train"]["planning"]
    assert set(balance["skills"].values()) == {2} and balance["spread"] == 0
    assert {c["spread"] for c in balance["cells"].values()} == {0}  # each six-skill cell: every suffix once
    # the same suite audited again gives the same report
    assert audit_bench(balanced_suite, BALANCED.audit_margin, BALANCED.audit_alpha) == report


def test_audit_json_stays_out_of_the_suite_digest(balanced_suite: Path, tmp_path: Path):
    digest = suite_digest(balanced_suite)
    (balanced_suite / "audit.json").rename(tmp_path / "audit.json")
    try:
        assert suite_digest(balanced_suite) == digest
    finally:
        (tmp_path / "audit.json").rename(balanced_suite / "audit.json")


@pytest.fixture
def same_suffix_for_every_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted leak: every training and evaluation oracle gets its family's first suffix."""
    deal = skill_plan.balanced_deal
    monkeypatch.setattr(skill_plan, "balanced_deal", lambda sizes, values, tag: (
        [[0] * n for n in sizes] if "oracle-suffix" in tag else deal(sizes, values, tag)))


@pytest.mark.usefixtures("same_suffix_for_every_oracle")
def test_a_planted_suffix_leak_fails_the_build_naming_predictor_split_accuracy_chance_and_margin(tmp_path: Path):
    with pytest.raises(AuditError) as failed:
        build_bench(LEAKY, {}, tmp_path)
    message = str(failed.value)
    assert "name.suffix on train: accuracy 1.0000 vs chance 0.1667" in message
    assert "name.family_suffix on eval70_v1: accuracy 1.0000 vs chance 0.1667" in message
    assert "> margin 0.05, p-value" in message and "< alpha 0.001 over" in message
    assert "oracle suffixes of planning on train" in message
    report = json.loads((tmp_path / "bench" / "audit.json").read_text())  # written before the build fails
    assert not report["passed"] and report["failures"] and all(
        not r["passed"] for r in report["predictors"]["name.suffix"]["splits"].values())
    assert all(p["splits"]["train"]["passed"] for n, p in report["predictors"].items() if n.startswith("position."))


def test_a_planted_position_leak_fails_the_position_predictors(balanced_suite: Path):
    """Slates rewritten so the oracle is always listed first: the names tell nothing, the index everything."""
    tasks = [replace(t, names=(t.oracle, *(n for n in t.names if n != t.oracle)))
             for t in load_audit_tasks(balanced_suite)]
    report = audit_tasks(tasks, margin=0.05, alpha=0.001)
    failing = {line.split(" on ")[0] for line in report["failures"]}
    assert {"position.slate_index", "position.family_slate_index", "position.cluster_rank",
            "position.cluster_index"} <= failing
    assert not {n for n in failing if n.startswith("name.")}
    assert report["predictors"]["position.slate_index"]["splits"]["train"]["accuracy"] == 1.0


def test_cli_audit_prints_the_report_and_fails_on_a_leak(balanced_suite: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    from deployments.cli import app

    runner = CliRunner()
    shown = runner.invoke(app, ["bench", "audit", "--bench", str(balanced_suite)])
    assert shown.exit_code == 0, shown.output
    assert "name.family_suffix" in shown.output and "passed" in shown.output
    as_json = runner.invoke(app, ["bench", "audit", "--bench", str(balanced_suite), "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output) == json.loads(
        (balanced_suite / "audit.json").read_text())
    # a suite whose oracles all share one suffix: `bench build` stops with the audit's message, exit 1 ...
    deal = skill_plan.balanced_deal
    monkeypatch.setattr(skill_plan, "balanced_deal", lambda sizes, values, tag: (
        [[0] * n for n in sizes] if "oracle-suffix" in tag else deal(sizes, values, tag)))
    out = tmp_path / "leaky"
    overrides = ['families=["procedural","planning"]', 'domains=["scheduling","data-formats"]',
                 "train_skills_per_cell=1", "train_tasks_per_skill=1", "eval_skills_per_cell=2", "eval_tasks=8",
                 "slate_skills_per_cell=2", "slate_tasks=8"]
    built = runner.invoke(app, ["bench", "build", "--seed", "11", "--out", str(out), *overrides])
    assert built.exit_code == 1 and "fails its shortcut audit" in built.output and "name.suffix on train" in built.output
    # ... and `bench audit` of what it left says so too
    again = runner.invoke(app, ["bench", "audit", "--bench", str(out)])
    assert again.exit_code == 1 and "FAILED" in again.output
    # built without the leak, the same config passes
    monkeypatch.undo()
    assert build_suite(LEAKY, tmp_path / "clean").tasks == 20
    assert audit_bench(tmp_path / "clean", LEAKY.audit_margin, LEAKY.audit_alpha)["passed"]

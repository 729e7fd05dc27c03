"""Arms at several seeds in the paper build: the label parser (the driver's labels read back), each arm
against the baseline at its own seed, the seeds-pooled comparison and the claim check made on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from paper_rows import FINGERPRINT, PROTOCOL_ID, REPEATS
from PIL import Image

from skillgate_core.evaluation.arm_label import ArmLabel, parse_arm_label, seed_label
from skillgate_core.evaluation.paper import build_paper
from skillgate_core.evaluation.paper_config import PaperConfig
from skillgate_core.evaluation.rows import EVAL_TRIALS_FILE, write_eval_rows

SECTION = "eval70_v1__mixed__r4"
SKILLGATE, BASELINE = "selector_clean_oracle_action_credit", "mixed_task_reward"
VARIANT = f"{SKILLGATE}+identity_first_mention"
STATISTICS = ["trial_success", "pass@4", "oracle_exposure", "clean_oracle_rate"]
GPU = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"

BASE = {f"t{i:02d}": (i % 2, 1) for i in range(12)}             # (oracle trials, resolved trials) of 4
MORE = {f"t{i:02d}": (i % 2 + 1 + i % 3, 1) for i in range(12)}  # 1-3 more oracle trials in every task


# --- the label ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("label", "parsed"), [
    ("mixed_task_reward", ArmLabel("mixed_task_reward", (), 0)),
    ("mixed_task_reward@s1", ArmLabel("mixed_task_reward", (), 1)),
    ("selector_clean_oracle_action_credit+identity_first_mention@s12",
     ArmLabel("selector_clean_oracle_action_credit", ("identity_first_mention",), 12)),
    ("a+b+c", ArmLabel("a", ("b", "c"), 0)),
    ("sft", ArmLabel("sft", (), 0)),
    # no arm shape: the whole label at seed 0 (@s0 is never written: seed 0 is the bare label)
    ("Qwen3-SFT@s1", ArmLabel("Qwen3-SFT@s1", (), 0)),
    ("mixed_task_reward@s0", ArmLabel("mixed_task_reward@s0", (), 0)),
    ("mixed_task_reward@s01", ArmLabel("mixed_task_reward@s01", (), 0)),
    ("x@s1@s2", ArmLabel("x@s1@s2", (), 0)),
])
def test_labels_are_read_back_and_others_kept_whole(label, parsed):
    assert parse_arm_label(label) == parsed
    assert parsed.label == label and seed_label(parsed.arm, parsed.seed) == label


def test_the_parser_reads_back_every_label_the_learning_result_driver_writes():
    sys.path.insert(0, str(GPU))
    try:
        import learning_result as lr
    finally:
        sys.path.remove(str(GPU))
    texts = ["mixed_task_reward", "mixed_task_reward@s1", "selector_clean_oracle_action_credit@s0",
             "selector_clean_oracle_action_credit+identity_first_mention", "bc@s3",
             "selector_action_credit+selector_on_zero_variance@s2"]
    for text in texts:
        arm = lr.parse_arm(text)
        assert parse_arm_label(arm.label) == ArmLabel(arm.kind, arm.variants, arm.seed), text
    assert parse_arm_label(lr.SFT_METHOD) == ArmLabel("sft", (), 0)


def test_labels_and_seeds_that_are_refused():
    with pytest.raises(ValueError, match="non-empty string"):
        parse_arm_label("")
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        seed_label("x", -1)
    with pytest.raises(ValueError, match=r"PaperConfig.baseline: 'mixed_task_reward@s1' names seed 1; give the "
                                         r"seed-0 label 'mixed_task_reward'"):
        PaperConfig(baseline="mixed_task_reward@s1")
    with pytest.raises(ValueError, match="PaperConfig.method must be a non-empty method label"):
        PaperConfig(method="")


# --- through the build ----------------------------------------------------------------------------------------

def arm_rows(method: str, tasks: dict[str, tuple[int, int]]) -> list[dict]:
    """REPEATS trials per task: the first `oracle` read only the oracle (the rest one misleading skill), the
    first `resolved` resolve."""
    rows = []
    for task, (oracle, resolved) in tasks.items():
        for repeat in range(REPEATS):
            category = "oracle" if repeat < oracle else "misleading"
            rows.append({"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "method": method, "task_id": task,
                         "benchmark": "b", "repeat": repeat, "outcome": "resolved" if repeat < resolved else "fail",
                         "status": "completed", "reads": [category], "read_names": [f"{task}-{category}"],
                         "first_read_category": category})
    return rows


def build(root: Path, arms: dict[str, dict[str, tuple[int, int]]]) -> tuple[dict, str, dict]:
    """The build of these arms: its protocol section of paper.json, report.md and the stage metrics."""
    for method, tasks in arms.items():
        write_eval_rows(arm_rows(method, tasks), root / "rows" / method / EVAL_TRIALS_FILE)
    built = build_paper(root / "rows", root / "out")
    doc = json.loads((root / "out" / "paper.json").read_text())
    return doc["protocols"][SECTION], (root / "out" / "report.md").read_text(), built.metrics


def intervals(comparison: dict) -> dict[str, dict]:
    return {i["statistic"]: i for i in comparison["intervals"]}


def test_each_arm_is_compared_with_the_baseline_at_its_own_seed(tmp_path):
    section, report, _ = build(tmp_path, {
        BASELINE: BASE, f"{BASELINE}@s1": MORE,  # the seed-1 baseline reads the oracle as often as SkillGate
        SKILLGATE: MORE, f"{SKILLGATE}@s1": MORE, f"{VARIANT}@s1": BASE, "sft": BASE,
        "selector_action_credit@s2": MORE})       # no baseline at seed 2
    table = section["tables"]["paired_bootstrap_methods"]
    by = {c["method"]: c for c in table["data"]["comparisons"]}
    # SkillGate's arm first (its seeds in order), then the rest by arm; the baseline's seed 1 is a reference
    assert list(by) == [SKILLGATE, f"{SKILLGATE}@s1", f"{VARIANT}@s1", "sft"]
    assert {m: (c["baseline"], c["arm_seeds"]) for m, c in by.items()} == {
        SKILLGATE: (BASELINE, [0]), f"{SKILLGATE}@s1": (f"{BASELINE}@s1", [1]),
        f"{VARIANT}@s1": (f"{BASELINE}@s1", [1]), "sft": (BASELINE, [0])}
    # seed 1 against seed 1: no difference (against seed 0's baseline it would be +50 pp)
    assert intervals(by[SKILLGATE])["oracle_exposure"]["difference"] == pytest.approx(0.5)
    assert intervals(by[f"{SKILLGATE}@s1"])["oracle_exposure"]["difference"] == 0.0
    assert intervals(by[f"{VARIANT}@s1"])["oracle_exposure"]["difference"] == pytest.approx(-0.5)
    assert intervals(by["sft"])["oracle_exposure"]["difference"] == 0.0
    assert table["data"]["skipped"] == [{"method": "selector_action_credit@s2",
                                         "reason": f"no rows for the baseline at seed 2 ({BASELINE}@s2)"}]
    assert f"No comparison: selector_action_credit@s2 (no rows for the baseline at seed 2 ({BASELINE}@s2))." in report
    # the SkillGate table stays seed 0's: the same numbers as its row above
    assert section["tables"]["paired_bootstrap"]["data"][0]["intervals"] == by[SKILLGATE]["intervals"]
    png = Image.open(tmp_path / "out" / "figures" / SECTION / "paired_bootstrap_methods.png")
    assert png.text["Title"] == f"Paired task-cluster bootstrap: every method - {BASELINE} at the method's seed"


def test_seeds_shared_with_the_baseline_are_pooled_by_task(tmp_path):
    worse = {t: (o, 0) for t, (o, _) in MORE.items()}  # seed 1 of SkillGate resolves nothing
    section, report, metrics = build(tmp_path, {
        BASELINE: BASE, f"{BASELINE}@s1": BASE, SKILLGATE: MORE, f"{SKILLGATE}@s1": worse,
        "selector_action_credit": MORE, "selector_action_credit@s2": MORE,  # seeds 0 and 2: only 0 shared
        "sft": BASE})
    table = section["tables"]["paired_bootstrap_pooled_seeds"]
    (pooled,) = table["data"]["comparisons"]
    assert (pooled["method"], pooled["baseline"], pooled["arm_seeds"], pooled["tasks"]) == (SKILLGATE, BASELINE,
                                                                                           [0, 1], 12)
    assert table["columns"][:3] == ["method", "seeds", "statistic"]
    assert [row[:3] for row in table["rows"]] == [[SKILLGATE, "0, 1", s] for s in STATISTICS]
    assert table["data"]["skipped"] == [{"method": "selector_action_credit", "reason": "rows at seeds 0, 2, of which "
                                         "the baseline has 0: fewer than 2 seeds to pool"}]
    assert section["pooled_seeds"] == {"skipped": None, "arms": {SKILLGATE: [0, 1]}}
    # by hand: 96 trials a side; SkillGate reads the oracle in 30 + 30 of them, the baseline in 6 + 6; it
    # resolves 12 + 0, the baseline 12 + 12
    got = intervals(pooled)
    assert got["oracle_exposure"]["method_value"] == 60 / 96 and got["oracle_exposure"]["baseline_value"] == 12 / 96
    assert got["trial_success"]["method_value"] == 12 / 96 and got["trial_success"]["baseline_value"] == 24 / 96
    # pass@4 = the mean of the seeds' pass@4 (1 at seed 0, 0 at seed 1), never pass@4 of 8 pooled trials
    per_seed = {c["method"]: intervals(c) for c in section["tables"]["paired_bootstrap_methods"]["data"]["comparisons"]}
    assert got["pass@4"]["method_value"] == pytest.approx(
        (per_seed[SKILLGATE]["pass@4"]["method_value"] + per_seed[f"{SKILLGATE}@s1"]["pass@4"]["method_value"]) / 2)
    assert (got["pass@4"]["method_value"], got["pass@4"]["baseline_value"]) == (0.5, 1.0)
    png = Image.open(tmp_path / "out" / "figures" / SECTION / "paired_bootstrap_pooled_seeds.png")
    assert png.text["Title"] == f"Paired task-cluster bootstrap: every arm - {BASELINE}, seeds pooled"
    assert json.loads(png.text["Axes"])[0]["title"] == "trial_success"
    # every seed's trial success is below the baseline's: the pooled claim does not hold, and says why
    claim = section["claim_check"]
    assert claim["pooled_seeds"] == [0, 1] and claim["seeds"] == [0, 1] and claim["holds"] is False
    assert [c["met"] for c in claim["criteria"]] == [True, True, False]
    assert metrics[f"{SECTION}/claim_holds"] is False and metrics[f"{SECTION}/claim_seeds"] == [0, 1]
    assert metrics[f"{SECTION}/pooled_trial_success_difference"] == got["trial_success"]["difference"]
    assert metrics[f"{SECTION}/trial_success_difference"] == 0.0  # the seed-0 table's, as before
    assert f"({SKILLGATE} - {BASELINE}, seeds 0, 1 pooled, all tasks, 95% intervals): **does not hold**" in report


def test_the_claim_is_made_on_the_pooled_seeds_and_lists_each_seeds_own(tmp_path):
    # Seed 0 alone holds; at seed 1 the baseline reads the oracle more than SkillGate, by as much: pooled, every
    # task's oracle-exposure difference is 0, so the claim does not hold (seed 0's check alone would say it did).
    section, report, metrics = build(tmp_path, {BASELINE: BASE, f"{BASELINE}@s1": MORE, SKILLGATE: MORE,
                                                f"{SKILLGATE}@s1": BASE})
    claim = section["claim_check"]
    assert claim["skipped"] is None and claim["pooled_seeds"] == [0, 1] and claim["holds"] is False
    assert (claim["method"], claim["baseline"]) == (SKILLGATE, BASELINE)
    exposure = {c["statistic"]: c for c in claim["criteria"]}["oracle_exposure"]
    assert (exposure["difference"], exposure["ci_low"], exposure["ci_high"], exposure["met"]) == (0.0, 0.0, 0.0, False)
    assert [(s["seed"], s["skipped"], s["holds"], s["baseline"]) for s in claim["per_seed"]] == [
        (0, None, True, BASELINE), (1, None, False, f"{BASELINE}@s1")]
    assert metrics[f"{SECTION}/claim_holds"] is False
    lines = report.splitlines()
    (pooled_line,) = [line for line in lines if line.startswith("**Claim check**")
                      and "pooled" in line and "this table is seed 0's" not in line]
    assert pooled_line.startswith(f"**Claim check** ({SKILLGATE} - {BASELINE}, seeds 0, 1 pooled, all tasks, 95% "
                                  "intervals): **does not hold**. oracle exposure +0.0 pp [+0.0, +0.0]")
    assert f"- Seed 0 check ({SKILLGATE} - {BASELINE}, all tasks, 95% intervals): **holds**." in report
    assert f"- Seed 1 check ({SKILLGATE}@s1 - {BASELINE}@s1, all tasks, 95% intervals): **does not hold**." in report
    # the seed-0 table points at it; the claim and the seed checks sit under the pooled table
    assert "**Claim check**: made on seeds 0, 1 pooled (below the seeds-pooled bootstrap); this table is seed 0's." \
        in report
    assert report.index("### Paired bootstrap, seeds pooled") < report.index(pooled_line) \
        < report.index("- Seed 1 check") < report.index("### Paired bootstrap: every method")

    holds, _, _ = build(tmp_path / "holds", {BASELINE: BASE, f"{BASELINE}@s1": BASE, SKILLGATE: MORE,
                                             f"{SKILLGATE}@s1": MORE})
    assert holds["claim_check"]["holds"] is True and [s["holds"] for s in holds["claim_check"]["per_seed"]] == [
        True, True]


def test_a_seed_that_cannot_be_paired_leaves_the_pooled_claim_unmade_with_its_reason(tmp_path):
    fewer_tasks = dict(list(MORE.items())[:6])
    section, report, metrics = build(tmp_path, {BASELINE: BASE, f"{BASELINE}@s1": BASE, SKILLGATE: MORE,
                                                f"{SKILLGATE}@s1": fewer_tasks})
    claim = section["claim_check"]
    assert claim["skipped"].startswith(f"seeds 0, 1 pooled: {SKILLGATE} seed 1 and {BASELINE} seed 1 were evaluated "
                                       "on different tasks")
    assert "holds" not in claim and f"{SECTION}/claim_holds" not in metrics
    assert claim["per_seed"][0]["holds"] is True
    assert claim["per_seed"][1] == {"seed": 1, "skipped": section["tables"]["paired_bootstrap_methods"]["data"][
        "skipped"][0]["reason"]}
    assert f"**Claim check**: not made ({claim['skipped']})." in report and "- Seed 1 check: not made (" in report
    assert section["tables"]["paired_bootstrap_pooled_seeds"]["data"]["comparisons"] == []
    assert not (tmp_path / "out" / "figures" / SECTION / "paired_bootstrap_pooled_seeds.png").exists()


def test_with_one_seed_shared_the_claim_and_tables_are_as_before(tmp_path):
    # SkillGate has a second seed, the baseline does not: nothing to pool, the claim is seed 0's
    section, report, metrics = build(tmp_path, {BASELINE: BASE, SKILLGATE: MORE, f"{SKILLGATE}@s1": MORE})
    claim = section["claim_check"]
    assert "pooled_seeds" not in claim and "per_seed" not in claim and claim["holds"] is True
    assert claim["seeds"] == [0] and f"{SECTION}/claim_seeds" not in metrics
    (line,) = [x for x in report.splitlines() if x.startswith("**Claim check**")]
    assert line.startswith(f"**Claim check** ({SKILLGATE} - {BASELINE}, all tasks, 95% intervals): **holds**.")
    assert section["tables"]["paired_bootstrap_pooled_seeds"]["data"]["skipped"] == [
        {"method": SKILLGATE, "reason": "rows at seeds 0, 1, of which the baseline has 0: fewer than 2 seeds to pool"}]
    assert section["tables"]["paired_bootstrap_methods"]["data"]["skipped"] == [
        {"method": f"{SKILLGATE}@s1", "reason": f"no rows for the baseline at seed 1 ({BASELINE}@s1)"}]
    # no arm with two seeds at all: no pooled table, and the JSON says why
    plain, _, _ = build(tmp_path / "plain", {BASELINE: BASE, SKILLGATE: MORE})
    assert "paired_bootstrap_pooled_seeds" not in plain["tables"]
    assert plain["pooled_seeds"] == {"skipped": "no compared arm has rows at two or more seeds", "arms": {}}


def test_pooled_claim_without_seed_0_rows_and_the_build_is_byte_identical(tmp_path):
    arms = {f"{BASELINE}@s1": BASE, f"{BASELINE}@s2": BASE, f"{SKILLGATE}@s1": MORE, f"{SKILLGATE}@s2": MORE}
    section, report, _ = build(tmp_path / "a", arms)
    assert section["bootstrap"]["skipped"] == f"no rows for method(s) {BASELINE}, {SKILLGATE}"
    assert section["claim_check"]["pooled_seeds"] == [1, 2] and section["claim_check"]["holds"] is True
    assert "**Claim check**: made on seeds 1, 2 pooled" in report
    build(tmp_path / "b", arms)
    for name in ("paper.json", "report.md"):
        assert (tmp_path / "a" / "out" / name).read_bytes() == (tmp_path / "b" / "out" / name).read_bytes()


def test_no_figure_cuts_off_a_label_when_the_arm_labels_are_long(tmp_path):
    # learning_smollm2_f52dc71: the pooled bootstrap's method labels (an arm, its variant and its seeds) squeezed
    # the axes until the x-axis label ran past the figure's right edge; the build widens such a figure
    masked = "selector_clean_oracle_masked_task_only"
    section, _, _ = build(tmp_path, {
        BASELINE: BASE, f"{BASELINE}@s1": BASE, SKILLGATE: MORE, f"{SKILLGATE}@s1": MORE, VARIANT: MORE,
        f"{VARIANT}@s1": MORE, masked: MORE, f"{masked}@s1": MORE, "sft": BASE})
    assert {"paired_bootstrap_pooled_seeds", "paired_bootstrap_methods"} <= set(section["figures"])
    assert {key: figure["clipped"] for key, figure in section["figures"].items() if figure["clipped"]} == {}
    png = Image.open(tmp_path / "out" / "figures" / SECTION / "paired_bootstrap_pooled_seeds.png")
    assert png.width > 7.5 * PaperConfig().dpi  # widened past the figure's 7.5-inch default

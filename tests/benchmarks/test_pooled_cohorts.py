"""benchmarks/pooled_cohorts.py on the committed learning-result folders: each cohort's own comparison is the one its
paper build made (paper/paper.json), two seeds of one cohort pool to the paper's seeds-pooled interval, and what
cannot be pooled is refused before anything is written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "gpu"
sys.path.insert(0, str(REPO / "benchmarks"))

import pooled_cohorts  # noqa: E402

C9A, C26 = RESULTS / "learning_smollm2_9a6e7f9", RESULTS / "learning_smollm2_26c74b7"
KEY = "eval70_v1_ctx8k__mixed__r4/"


def paper_metrics(folder: Path) -> dict:
    return json.loads((folder / "paper" / "paper.json").read_text())["stages"]["paper"]["metrics"]


def test_each_pair_and_one_cohorts_seeds_are_what_its_paper_build_computed(tmp_path):
    out = tmp_path / "pooled.json"
    assert pooled_cohorts.main(["--cohort", str(C9A), "--cohort", str(C26), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["post_hoc"] is True and [c["seeds"] for c in result["cohorts"]] == [[0], [0, 1]]
    for folder, label in ((C9A, "SFT aaf89e9cc457 seed 0"), (C26, "SFT 4002179e18a2 seed 0")):
        paper = paper_metrics(folder)
        exposure = next(i for i in result["per_pair"][label]["intervals"] if i["statistic"] == "oracle_exposure")
        assert exposure["difference"] == pytest.approx(paper[KEY + "oracle_exposure_difference"], abs=1e-12)
        assert [exposure["ci_low"], exposure["ci_high"]] == pytest.approx(paper[KEY + "oracle_exposure_ci"], abs=1e-12)
    # three pairs, 840 trials a side: the pooled difference is the trial-pooled one, not the mean of the pairs'
    pooled = {i["statistic"]: i for i in result["pooled"]["intervals"]}
    diffs = [next(i for i in p["intervals"] if i["statistic"] == "trial_success") for p in result["per_pair"].values()]
    assert pooled["trial_success"]["difference"] == pytest.approx(sum(d["difference"] for d in diffs) / 3, abs=1e-12)
    assert result["claim"]["holds"] is False and result["pooled"]["arm_seeds"] == [0, 0, 1]


def test_one_cohorts_two_seeds_pool_to_its_papers_seeds_pooled_interval(tmp_path):
    out = tmp_path / "one.json"
    pooled_cohorts.main(["--cohort", str(C26), "--json", str(out)])
    pooled = {i["statistic"]: i for i in json.loads(out.read_text())["pooled"]["intervals"]}
    paper = paper_metrics(C26)
    assert pooled["oracle_exposure"]["difference"] == pytest.approx(paper[KEY + "pooled_oracle_exposure_difference"])
    assert [pooled["oracle_exposure"]["ci_low"], pooled["oracle_exposure"]["ci_high"]] == pytest.approx(
        paper[KEY + "pooled_oracle_exposure_ci"])


def test_refusals_write_nothing(tmp_path):
    out = tmp_path / "never.json"
    # two SFT policies given as one cohort: the paper build's own refusal
    with pytest.raises(SystemExit, match="different SFT policies"):
        pooled_cohorts.main(["--cohort", f"{C9A},{C26}", "--json", str(out)])
    with pytest.raises(SystemExit, match="the same SFT policy"):
        pooled_cohorts.main(["--cohort", str(C26), "--cohort", str(C26), "--json", str(out)])
    with pytest.raises(SystemExit, match="expected existing folders"):
        pooled_cohorts.main(["--cohort", str(tmp_path / "absent"), "--json", str(out)])
    # a cohort without rows of the baseline at any seed the method has
    with pytest.raises(SystemExit, match="no seed with rows of both"):
        pooled_cohorts.main(["--cohort", str(C26), "--baseline", "selector_clean_oracle_masked_task_only",
                             "--json", str(out)])
    assert not out.exists()


def test_cohorts_under_different_grpo_recipes_are_refused_naming_the_fields():
    sixteen = {"folders": ["a"], "recipe": json.dumps({"steps": 16, "learning_rate": 1.5e-5, "group_size": 8})}
    thirty_two = {"folders": ["b"], "recipe": json.dumps({"steps": 32, "learning_rate": 1.5e-5, "group_size": 8})}
    assert pooled_cohorts.one_recipe([sixteen, dict(sixteen, folders=["c"])])["steps"] == 16
    with pytest.raises(SystemExit, match=r"different GRPO recipes(.|\n)*\['a'\]: steps=16\n  \['b'\]: steps=32"):
        pooled_cohorts.one_recipe([sixteen, thirty_two])

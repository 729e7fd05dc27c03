"""The oracle's suffix and description template are dealt, not drawn: each of the six marks the oracle of
as many skills as any other, per (family, split) and per (family, domain) cell of six skills or more,
and the training tasks keep that balance."""

from __future__ import annotations

from collections import Counter

import pytest

from skillgate_core.benchgen import FAMILIES, BenchBuildConfig
from skillgate_core.benchgen.balanced_draws import balanced_deal
from skillgate_core.benchgen.skill_plan import TEMPLATES, SkillSet, plan_skills
from skillgate_core.benchgen.suite import plan_tasks


def spread(counts: Counter, values) -> int:
    return max(counts[v] for v in values) - min(counts[v] for v in values)


@pytest.mark.parametrize("sizes", [[6, 6, 6, 6], [1, 1, 1, 1], [7, 7, 7, 7], [2, 3, 5], [13]])
def test_a_deal_spreads_the_values_within_one_per_cell_and_overall(sizes):
    deal = balanced_deal(sizes, 6, tag="t")
    assert [len(cell) for cell in deal] == sizes
    assert spread(Counter(v for cell in deal for v in cell), range(6)) <= 1
    for cell in deal:  # a cell's skills are consecutive in the cycle
        assert spread(Counter(cell), range(6)) <= 1
    assert deal == balanced_deal(sizes, 6, tag="t")  # a pure function of the tag: every process re-plans alike
    assert any(balanced_deal(sizes, 6, tag=f"t{k}") != deal for k in range(5))


@pytest.fixture(scope="module")
def default_plan() -> list[SkillSet]:
    return plan_skills(BenchBuildConfig())


def oracle_suffix(s: SkillSet) -> str:
    return s.oracle.name[len(f"{s.codename}-{FAMILIES[s.family].noun[s.domain]}-"):]


def oracle_template(s: SkillSet) -> int:
    """Which of the family's templates wrote the oracle's description (found through Family.describe)."""
    (template,) = [t for t in range(TEMPLATES) if FAMILIES[s.family].describe(s.draft, t) == s.oracle.description]
    return template


def test_the_default_plan_deals_every_suffix_and_template_evenly(default_plan):
    config = BenchBuildConfig()
    for family in config.families:
        suffixes = FAMILIES[family].suffixes
        for split in ("train", "eval70_v1", "slate147"):
            sets = [s for s in default_plan if s.family == family and s.split == split]
            by_suffix, by_template = Counter(map(oracle_suffix, sets)), Counter(map(oracle_template, sets))
            assert spread(by_suffix, suffixes) <= 1 and spread(by_template, range(TEMPLATES)) <= 1, (family, split)
        for domain in config.domains:  # six held-in skills per cell: each suffix and template exactly once
            cell = [s for s in default_plan if s.family == family and s.domain == domain and s.split == "train"]
            assert sorted(map(oracle_suffix, cell)) == sorted(suffixes)
            assert sorted(map(oracle_template, cell)) == list(range(TEMPLATES))
    # each lookalike holds another of the six: a cluster shows all six suffixes and all six templates once
    for s in default_plan:
        names = [e.name for e in (s.oracle, *s.lookalikes)]
        assert sorted(n.rsplit(f"{FAMILIES[s.family].noun[s.domain]}-", 1)[1] for n in names) == sorted(
            FAMILIES[s.family].suffixes)


def test_training_tasks_keep_the_balance_and_eval_tasks_follow_the_round_robin_deal(default_plan):
    config = BenchBuildConfig()
    jobs = plan_tasks(config, default_plan)
    for family in config.families:
        per_split = {split: Counter(oracle_suffix(default_plan[i]) for _, i in jobs
                                    if default_plan[i].family == family and default_plan[i].split == split)
                     for split in ("train", "eval70_v1")}
        # 11 tasks per held-in skill, 4 skills per suffix: 44 training tasks each
        assert set(per_split["train"].values()) == {44} and len(per_split["train"]) == 6
        # eval70_v1 deals 70 tasks over 16 held-out skills (4 or 5 each): a family's 4 skills use 4 of its
        # 6 suffixes, 4 or 5 tasks each
        assert len(per_split["eval70_v1"]) == 4 and set(per_split["eval70_v1"].values()) <= {4, 5}

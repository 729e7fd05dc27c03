"""pass@k against brute force, vector 9, the behaviour cost, the paired bootstrap against exact
enumeration of every resample (docs/method.md 8-9), its oracle-exposure and clean-oracle intervals, and
the claim check read off them; seeds pooled by task (pass@k the mean of the seeds'), and any list of pairs
pooled the same way (the claim's two arms from several SFT policies)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from skillgate_core.evaluation.bootstrap import (
    BootstrapInterval,
    TaskSetMismatchError,
    bootstrap_differences,
    paired_bootstrap,
    pooled_paired_bootstrap,
    pooled_pairs_bootstrap,
    rate_differences,
)
from skillgate_core.evaluation.claim import claim_check
from skillgate_core.evaluation.metrics import Outcome, Trial, behaviour_cost, pass_at_k, summarize_trials
from skillgate_core.evaluation.protocol import ProtocolMismatchError

FP = "a" * 64


def trials(spec: dict[str, list[str]], bench: str = "b") -> list[Trial]:
    """task -> outcomes, in repeat order."""
    return [Trial(task, bench, r, o) for task, outcomes in spec.items() for r, o in enumerate(outcomes)]


def test_vector_9_from_parquet_shaped_rows():
    rows = [{"task_id": "t", "benchmark": "b", "repeat": r, "outcome": o, "reads": [], "read_names": []}
            for r, o in enumerate(["resolved", "fail", "error", "fail"])]
    m = summarize_trials([Trial.from_row(r) for r in rows])
    assert m["trial_success"] == 0.25 and m["pass@4"] == 1.0 and m["pass@1"] == 0.25
    assert m["errors"] == 1 and m["outcomes"] == {"resolved": 1, "fail": 2, "error": 1}
    assert m["by_benchmark"]["b"]["pass@4"] == 1.0 and m["by_benchmark"]["b"]["errors"] == 1


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_brute_force_over_k_subsets(n):
    for c in range(n + 1):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            exact = Fraction(sum(any(outcomes[i] for i in s) for s in subsets), len(subsets))
            assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-15, abs=1e-15), (n, c, k)


def test_summarized_pass_at_k_is_the_task_mean_of_brute_force():
    spec = {"a": ["resolved", "fail", "fail", "fail", "error", "resolved"], "b": ["fail"] * 6,
            "c": ["resolved", "resolved", "error", "fail", "fail", "fail"]}
    m = summarize_trials(trials(spec), ks=(1, 2, 4, 6))
    for k in (1, 2, 4, 6):
        brute = []
        for outcomes in spec.values():
            subsets = list(itertools.combinations(outcomes, k))
            brute.append(sum("resolved" in s for s in subsets) / len(subsets))
        assert m[f"pass@{k}"] == pytest.approx(sum(brute) / len(brute), rel=1e-12)
    assert m["errors"] == 2 and m["trial_success"] == 4 / 18


def test_pass_at_k_is_skipped_when_a_task_has_fewer_trials():
    m = summarize_trials(trials({"a": ["resolved"] * 4, "b": ["fail"] * 3}), ks=(1, 4))
    # pass@1 is a mean over tasks; trial success pools trials (they differ when repeats differ)
    assert "pass@4" not in m and m["pass@1"] == 0.5 and m["trial_success"] == 4 / 7


def test_behaviour_cost_and_first_read_rates():
    ts = [Trial("a", "x", 0, "resolved", ("oracle", "misleading"), ("o", "m"), turns=4, response_tokens=100,
                loss_tokens=90, seconds=2.0),
          Trial("a", "x", 1, "fail", (), (), turns=2, response_tokens=50, loss_tokens=40, seconds=1.0)]
    cost = behaviour_cost(ts)
    assert cost == {"reads_per_trial": 1.0, "unique_reads_per_trial": 1.0, "consulted_skills_per_trial": 1.0,
                    "turns_per_trial": 3.0,
                    "response_tokens_per_trial": 75.0, "loss_tokens_per_trial": 65.0, "seconds_per_trial": 1.5,
                    "response_tokens_per_resolved": 150.0}
    m = summarize_trials(ts, ks=(1, 2))
    assert m["oracle_first_read_rate"] == 0.5 and m["misleading_first_read_rate"] == 0.0
    assert m["cost"] == cost and [t.read_sequence for t in ts] == ["[O,M]", "[]"]


def test_bootstrap_hand_computed_two_task_case():
    # Task A: method 4/4, baseline 2/4 (d = 0.5); task B: both 0/4 (d = 0). The 4 equally likely resamples
    # (A,A) (A,B) (B,A) (B,B) give trial-success differences 0.5, 0.25, 0.25, 0: P(0) = 1/4, so the 2.5%
    # percentile is 0 and the 97.5% one is 0.5. pass@4 is 1 for A on both sides: difference 0 always.
    method = trials({"A": ["resolved"] * 4, "B": ["fail"] * 4})
    baseline = trials({"A": ["resolved", "fail", "resolved", "error"], "B": ["fail", "error", "fail", "fail"]})
    r = paired_bootstrap(method, baseline, method_label="m", baseline_label="b", method_fingerprint=FP,
                         baseline_fingerprint=FP, resamples=10_000, seed=3)
    success, passk = r.interval("trial_success"), r.interval("pass@4")
    assert (success.method_value, success.baseline_value, success.difference) == (0.5, 0.25, 0.25)
    assert (success.ci_low, success.ci_high) == (0.0, 0.5)
    assert (passk.difference, passk.ci_low, passk.ci_high) == (0.0, 0.0, 0.0)
    values, counts = np.unique(r.distributions["trial_success"], return_counts=True)
    assert values.tolist() == [0.0, 0.25, 0.5]
    assert counts / counts.sum() == pytest.approx([0.25, 0.5, 0.25], abs=0.02)


def _exact_distribution(method: list[Trial], baseline: list[Trial], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered resample of T tasks (T^T of them, equally likely), as (success diffs, pass@k diffs)."""
    tasks = sorted({t.task_id for t in method})

    def arrays(ts: list[Trial]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = np.array([sum(t.task_id == x for t in ts) for x in tasks], dtype=float)
        c = np.array([sum(t.task_id == x and t.resolved for t in ts) for x in tasks], dtype=float)
        p = np.array([pass_at_k(int(ni), int(ci), k) for ni, ci in zip(n, c, strict=True)])
        return n, c, p

    draws = np.array(list(itertools.product(range(len(tasks)), repeat=len(tasks))))
    weights = np.stack([np.bincount(d, minlength=len(tasks)) for d in draws])
    return bootstrap_differences(*arrays(method), *arrays(baseline), weights)


def _exact_quantile(values: np.ndarray, p: float) -> tuple[float, float]:
    """inf{x: F(x) >= p} of the equally weighted `values`, and how far F is from p around it (the margin)."""
    xs, counts = np.unique(np.round(values, 12), return_counts=True)
    cdf = np.cumsum(counts) / counts.sum()
    i = int(np.searchsorted(cdf, p))
    below = cdf[i - 1] if i else 0.0
    return float(xs[i]), float(min(cdf[i] - p, p - below))


def test_bootstrap_matches_exact_enumeration_of_every_resample():
    # 5 tasks x 4 repeats, per-task differences in resolved counts of -2, +2, 0, -2, +1 (errors unresolved):
    # 5^5 = 3125 equally likely resamples.
    method = trials({"t1": ["error", "error", "resolved", "resolved"], "t2": ["resolved", "fail", "resolved", "resolved"],
                     "t3": ["error", "error", "resolved", "error"], "t4": ["error"] * 4,
                     "t5": ["fail", "resolved", "resolved", "resolved"]})
    baseline = trials({"t1": ["resolved"] * 4, "t2": ["error", "error", "error", "resolved"],
                       "t3": ["fail", "resolved", "fail", "fail"], "t4": ["error", "resolved", "error", "resolved"],
                       "t5": ["fail", "resolved", "resolved", "error"]})
    exact_success, exact_passk = _exact_distribution(method, baseline, k=4)
    big = paired_bootstrap(method, baseline, method_label="m", baseline_label="b", method_fingerprint=FP,
                           baseline_fingerprint=FP, resamples=200_000, seed=11)
    for interval, exact in zip(big.intervals[:2], (exact_success, exact_passk), strict=True):
        dist = big.distributions[interval.statistic]
        # Closed form for equal repeats: the mean of the resampled differences is the observed difference.
        assert exact.mean() == pytest.approx(interval.difference, abs=1e-12)
        assert dist.mean() == pytest.approx(exact.mean(), abs=4 * exact.std() / np.sqrt(len(dist)))
        assert dist.std() == pytest.approx(exact.std(), rel=0.01)
        for p, got in ((0.025, interval.ci_low), (0.975, interval.ci_high)):
            q, margin = _exact_quantile(exact, p)
            assert margin > 0.008, "the exact quantile must sit inside a step of the CDF for this check"
            assert got == pytest.approx(q, abs=1e-12), (interval.statistic, p)
    # The paper's setting (10,000 resamples) lands on the same exact percentiles here.
    small = paired_bootstrap(method, baseline, method_label="m", baseline_label="b", method_fingerprint=FP,
                             baseline_fingerprint=FP, resamples=10_000, seed=0)
    for a, b in zip(small.intervals, big.intervals, strict=True):
        assert (a.ci_low, a.ci_high) == pytest.approx((b.ci_low, b.ci_high), abs=1e-12)


def test_bootstrap_is_seeded():
    method = trials({f"t{i}": ["resolved" if (i * r) % 3 else "fail" for r in range(4)] for i in range(12)})
    baseline = trials({f"t{i}": ["resolved" if (i + r) % 4 == 0 else "fail" for r in range(4)] for i in range(12)})
    kw = dict(method_label="m", baseline_label="b", method_fingerprint=FP, baseline_fingerprint=FP)
    a, b = paired_bootstrap(method, baseline, seed=5, **kw), paired_bootstrap(method, baseline, seed=5, **kw)
    assert a.intervals == b.intervals and np.array_equal(a.distributions["pass@4"], b.distributions["pass@4"])
    c = paired_bootstrap(method, baseline, seed=6, **kw)
    assert not np.array_equal(a.distributions["trial_success"], c.distributions["trial_success"])
    assert a.to_json()["resamples"] == 10_000 and a.tasks == 12


def test_bootstrap_refusals():
    m = trials({"a": ["resolved"] * 4, "b": ["fail"] * 4})
    other_fp = "b" * 64
    with pytest.raises(ProtocolMismatchError) as err:
        paired_bootstrap(m, m, method_label="skillgate", baseline_label="mixed", method_fingerprint=FP,
                         baseline_fingerprint=other_fp)
    assert "skillgate=aaaaaaaaaa" in str(err.value) and "mixed=bbbbbbbbbb" in str(err.value)
    with pytest.raises(TaskSetMismatchError, match=r"1 only in m \['b'\], 1 only in b \['c'\]"):
        paired_bootstrap(m, trials({"a": ["fail"] * 4, "c": ["fail"] * 4}), method_label="m", baseline_label="b",
                         method_fingerprint=FP, baseline_fingerprint=FP)
    with pytest.raises(ValueError, match="resamples must be >= 10000"):
        paired_bootstrap(m, m, method_label="m", baseline_label="b", method_fingerprint=FP,
                         baseline_fingerprint=FP, resamples=999)
    with pytest.raises(ValueError, match="pass@4 needs >= 4 trials per task"):
        short = trials({"a": ["fail"] * 3, "b": ["fail"] * 4})
        paired_bootstrap(short, short, method_label="m", baseline_label="b", method_fingerprint=FP,
                         baseline_fingerprint=FP)


# --- oracle exposure and clean-oracle rate in the paired bootstrap; the claim check ---------------------------

ORACLE_READ, MISLEADING_READ = ("oracle", "o"), ("misleading", "m")
"""(category, skill name) of one read."""


def read_trials(spec: dict[str, list[tuple[Outcome, tuple[tuple[str, str], ...]]]]) -> list[Trial]:
    """task -> (outcome, reads as (category, name) pairs), in repeat order."""
    return [Trial(task, "b", r, outcome, tuple(c for c, _ in reads), tuple(n for _, n in reads))
            for task, spec_trials in spec.items() for r, (outcome, reads) in enumerate(spec_trials)]


def exposure_arm(oracle_trials: dict[str, int], *, extra_read: tuple[str, str] | None = None) -> list[Trial]:
    """4 trials per task: the first `oracle_trials[task]` read the oracle (then `extra_read`, if any), the
    rest read a misleading skill; repeat 0 resolves and the others fail, in every arm (same success)."""
    return read_trials({
        task: [("resolved" if r == 0 else "fail",
                ((ORACLE_READ,) + ((extra_read,) if extra_read else ())) if r < k else (MISLEADING_READ,)) for r in range(4)]
        for task, k in oracle_trials.items()})


BASELINE_ORACLE = {f"t{i}": i % 2 for i in range(12)}       # 0 or 1 of 4 trials read the oracle
MORE_ORACLE = {f"t{i}": i % 2 + 1 + i % 3 for i in range(12)}  # every task 1-3 trials more


def _boot(method: list[Trial], baseline: list[Trial], **kw):
    return paired_bootstrap(method, baseline, method_label="skillgate", baseline_label="mixed", method_fingerprint=FP,
                            baseline_fingerprint=FP, **kw)


def test_oracle_exposure_and_clean_oracle_come_with_their_own_interval():
    baseline = exposure_arm(BASELINE_ORACLE)
    r = _boot(exposure_arm(MORE_ORACLE), baseline)
    assert [i.statistic for i in r.intervals] == ["trial_success", "pass@4", "oracle_exposure", "clean_oracle_rate"]
    exposure, clean = r.interval("oracle_exposure"), r.interval("clean_oracle_rate")
    # by hand: 6 of 48 baseline trials read the oracle, 6 + 12 + 4 x 3 = 30 of 48 of the method's
    assert (exposure.baseline_value, exposure.method_value) == (6 / 48, 30 / 48)
    assert exposure.difference == pytest.approx(0.5)
    # every task's difference is positive (+1..+3 trials of 4): no resample can reach 0
    assert 0.25 <= exposure.ci_low <= exposure.difference <= exposure.ci_high <= 0.75
    assert clean == BootstrapInterval("clean_oracle_rate", *(getattr(exposure, f) for f in (
        "method_value", "baseline_value", "difference", "ci_low", "ci_high")))  # only [O] reads: the same
    # the reads differ, the outcomes do not: trial success and pass@k are 0 on every draw
    for statistic in ("trial_success", "pass@4"):
        i = r.interval(statistic)
        assert (i.difference, i.ci_low, i.ci_high) == (0.0, 0.0, 0.0)
    with pytest.raises(KeyError, match="no statistic 'pass@2'"):
        r.interval("pass@2")


def test_clean_oracle_counts_distinct_reads_exactly_the_oracle():
    # [O, M] is exposed but not clean; [O, O] (the oracle read twice) is both
    mixed_reads = _boot(exposure_arm(MORE_ORACLE, extra_read=MISLEADING_READ), exposure_arm(BASELINE_ORACLE))
    assert mixed_reads.interval("oracle_exposure").difference == pytest.approx(0.5)
    clean = mixed_reads.interval("clean_oracle_rate")
    assert (clean.method_value, clean.baseline_value) == (0.0, 6 / 48) and clean.ci_high < 0
    twice = _boot(exposure_arm(MORE_ORACLE, extra_read=ORACLE_READ), exposure_arm(BASELINE_ORACLE))
    assert twice.interval("clean_oracle_rate") == _boot(exposure_arm(MORE_ORACLE),
                                                        exposure_arm(BASELINE_ORACLE)).interval("clean_oracle_rate")


def test_an_arm_identical_to_the_baseline_differs_by_zero_everywhere():
    arm = exposure_arm(MORE_ORACLE)
    r = _boot(arm, list(arm))
    for i in r.intervals:
        assert (i.difference, i.ci_low, i.ci_high) == (0.0, 0.0, 0.0), i.statistic


def test_selection_rates_match_exact_enumeration():
    # 4 tasks, exposure differences per task of +1, 0, +2, -1 trials (of 4): 4^4 = 256 resamples
    method = exposure_arm({"a": 2, "b": 1, "c": 3, "d": 0})
    baseline = exposure_arm({"a": 1, "b": 1, "c": 1, "d": 1})
    tasks = ["a", "b", "c", "d"]
    draws = np.array(list(itertools.product(range(4), repeat=4)))
    weights = np.stack([np.bincount(d, minlength=4) for d in draws])

    def counted(ts: list[Trial]) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([sum(t.task_id == x for t in ts) for x in tasks], dtype=float),
                np.array([sum(t.task_id == x and "oracle" in t.reads for t in ts) for x in tasks], dtype=float))

    exact = rate_differences(*counted(method), *counted(baseline), weights)
    r = _boot(method, baseline, resamples=200_000, seed=2)
    interval = r.interval("oracle_exposure")
    assert interval.difference == pytest.approx(exact.mean(), abs=1e-12)
    assert r.distributions["oracle_exposure"].std() == pytest.approx(exact.std(), rel=0.01)
    for p, got in ((0.025, interval.ci_low), (0.975, interval.ci_high)):
        q, margin = _exact_quantile(exact, p)
        assert margin > 0.005 and got == pytest.approx(q, abs=1e-12)


def test_claim_check_holds_only_when_all_three_intervals_agree():
    baseline = exposure_arm(BASELINE_ORACLE)
    holds = claim_check(_boot(exposure_arm(MORE_ORACLE), baseline))
    assert holds.holds and [c.met for c in holds.checks] == [True, True, True]
    line = holds.line()
    assert line.startswith("**Claim check** (skillgate - mixed, all tasks, 95% intervals): **holds**.")
    assert "oracle exposure +50.0 pp [" in line and "trial success +0.0 pp [+0.0, +0.0]" in line
    assert holds.to_json()["holds"] is True and [c["statistic"] for c in holds.to_json()["criteria"]] == [
        "oracle_exposure", "clean_oracle_rate", "trial_success"]

    same = claim_check(_boot(baseline, list(baseline)))  # no selection gain: exposure [0, 0] is not above 0
    assert not same.holds and [c.met for c in same.checks] == [False, False, True]
    assert "**does not hold**" in same.line() and "oracle exposure +0.0 pp [+0.0, +0.0] (needs the interval " \
        "above 0: no)" in same.line()

    # more oracle reads but every task resolves less: trial success wholly below 0 sinks the claim
    worse = [Trial(t.task_id, t.benchmark, t.repeat, "fail", t.reads, t.read_names) for t in exposure_arm(MORE_ORACLE)]
    lost = claim_check(_boot(worse, baseline))
    assert [c.met for c in lost.checks] == [True, True, False] and not lost.holds
    assert "trial success -25.0 pp [-25.0, -25.0] (needs the interval not wholly below 0: no)" in lost.line()


# --- seeds pooled: a task's cluster is all its trials over the seeds ------------------------------------------

def _pooled(method: dict[int, list[Trial]], baseline: dict[int, list[Trial]], **kw):
    return pooled_paired_bootstrap(method, baseline, method_label="skillgate", baseline_label="mixed",
                                   method_fingerprint=FP, baseline_fingerprint=FP, **kw)


def test_pooled_seeds_by_hand_pass_at_k_is_the_mean_of_the_seeds():
    # Task A: the method resolves 2/4 at seed 0 and 0/4 at seed 1, the baseline 0/4 at both; task B: the method
    # 0/4 at both, the baseline 1/4 at seed 0 and 0/4 at seed 1. Rates pool the 8 trials of a task; pass@4 is
    # each seed's pass@4 averaged: A's method 1/2 (not pass@4 of 2 in 8 = 55/70), B's baseline 1/2.
    method = {0: trials({"A": ["resolved", "resolved", "fail", "fail"], "B": ["fail"] * 4}),
              1: trials({"A": ["fail"] * 4, "B": ["error", "fail", "fail", "fail"]})}
    baseline = {0: trials({"A": ["fail"] * 4, "B": ["fail", "resolved", "fail", "fail"]}),
                1: trials({"A": ["fail"] * 4, "B": ["fail"] * 4})}
    r = _pooled(method, baseline, seed=4)
    assert r.arm_seeds == (0, 1) and r.pooled and r.tasks == 2 and r.to_json()["arm_seeds"] == [0, 1]
    success, passk = r.interval("trial_success"), r.interval("pass@4")
    assert (success.method_value, success.baseline_value, success.difference) == (2 / 16, 1 / 16, 1 / 16)
    assert (passk.method_value, passk.baseline_value, passk.difference) == (0.25, 0.25, 0.0)
    # 4 equally likely task draws, each task with both seeds' trials: (A,A) (A,B) (B,A) (B,B)
    for statistic, draws in (("trial_success", [4 / 16, 1 / 16, 1 / 16, -2 / 16]), ("pass@4", [0.5, 0.0, 0.0, -0.5])):
        values, counts = np.unique(r.distributions[statistic], return_counts=True)
        assert values.tolist() == pytest.approx(sorted(set(draws)))
        assert counts / counts.sum() == pytest.approx([0.25, 0.5, 0.25], abs=0.02)
        assert (r.interval(statistic).ci_low, r.interval(statistic).ci_high) == pytest.approx((min(draws), max(draws)))


def test_pooled_seeds_resample_a_task_with_all_its_seeds():
    # Seed 0: the method reads the oracle in one more trial of every task; seed 1: one fewer. Pooled per task the
    # difference is 0: with every seed's trials of a task drawn together no resample can move it off 0 (drawing
    # the seeds apart would give an interval around 0, not [0, 0]).
    more = {f"t{i}": 2 + i % 2 for i in range(12)}
    fewer = {f"t{i}": 1 + i % 2 for i in range(12)}
    r = _pooled({0: exposure_arm(more), 1: exposure_arm(fewer)}, {0: exposure_arm(fewer), 1: exposure_arm(more)})
    exposure = r.interval("oracle_exposure")
    assert (exposure.difference, exposure.ci_low, exposure.ci_high) == (0.0, 0.0, 0.0)
    per_seed = _boot(exposure_arm(more), exposure_arm(fewer)).interval("oracle_exposure")
    assert per_seed.ci_low > 0  # one seed alone: the interval is above 0


def test_two_copies_of_one_seed_pool_to_that_seed():
    method, baseline = exposure_arm(MORE_ORACLE), exposure_arm(BASELINE_ORACLE)
    one = _boot(method, baseline, seed=7)
    two = _pooled({0: method, 3: list(method)}, {0: baseline, 3: list(baseline)}, seed=7)
    assert two.intervals == one.intervals and two.arm_seeds == (0, 3) and one.arm_seeds == ()
    for statistic, dist in one.distributions.items():
        assert np.allclose(two.distributions[statistic], dist, rtol=0, atol=1e-12), statistic


def test_pooled_seeds_refusals():
    m = trials({"a": ["resolved"] * 4, "b": ["fail"] * 4})
    with pytest.raises(ValueError, match=r"the same non-empty set on both sides: skillgate has \[0, 1\], mixed has "
                                         r"\[0\]"):
        _pooled({0: m, 1: m}, {0: m})
    with pytest.raises(ValueError, match="the same non-empty set"):
        _pooled({}, {})
    other = trials({"a": ["fail"] * 4, "c": ["fail"] * 4})
    # seed 1's arm on other tasks than seed 1's baseline
    with pytest.raises(TaskSetMismatchError, match=r"skillgate seed 1 and mixed seed 1 were evaluated on different"):
        _pooled({0: m, 1: other}, {0: m, 1: m})
    # both arms of seed 1 on the same tasks, but other ones than seed 0's: a task would lack a seed's trials
    with pytest.raises(TaskSetMismatchError, match=r"skillgate seed 0 and skillgate seed 1 were evaluated"):
        _pooled({0: m, 1: other}, {0: m, 1: other})
    with pytest.raises(ValueError, match="skillgate seed 1: pass@4 needs >= 4 trials per task"):
        _pooled({0: m, 1: trials({"a": ["fail"] * 3, "b": ["fail"] * 4})},
                {0: m, 1: trials({"a": ["fail"] * 3, "b": ["fail"] * 4})})


# --- pairs pooled: the same two arms from several SFT policies, each pair on its own ------------------------------

def _pairs(pairs, **kw):
    return pooled_pairs_bootstrap(pairs, method_label="skillgate", baseline_label="mixed",
                                  method_fingerprint=FP, baseline_fingerprint=FP, **kw)


def test_pooled_pairs_are_the_seeds_pooling_over_any_pairs():
    # Two pairs (cohort x at seed 0, cohort y at seed 0) give exactly what the same trials give as seeds 0 and 1
    more = {f"t{i}": 2 + i % 2 for i in range(12)}
    fewer = {f"t{i}": 1 + i % 3 for i in range(12)}
    m1, b1, m2, b2 = exposure_arm(more), exposure_arm(fewer), exposure_arm(fewer), exposure_arm(BASELINE_ORACLE)
    seeds = _pooled({0: m1, 1: m2}, {0: b1, 1: b2}, seed=5)
    pairs = _pairs([("x s0", m1, b1), ("y s0", m2, b2)], seed=5, arm_seeds=(0, 0))
    assert pairs.intervals == seeds.intervals and pairs.arm_seeds == (0, 0) and pairs.pooled
    for statistic, dist in seeds.distributions.items():
        assert np.array_equal(pairs.distributions[statistic], dist), statistic
    # pooled over trials: the pairs' oracle reads summed on each side
    exposure = pairs.interval("oracle_exposure")
    assert exposure.method_value == pytest.approx((sum(more.values()) + sum(fewer.values())) / 96)
    assert exposure.baseline_value == pytest.approx((sum(fewer.values()) + sum(BASELINE_ORACLE.values())) / 96)


def test_pooled_pairs_refusals():
    m = trials({"a": ["resolved"] * 4, "b": ["fail"] * 4})
    other = trials({"a": ["fail"] * 4, "c": ["fail"] * 4})
    with pytest.raises(ValueError, match="at least one"):
        _pairs([])
    with pytest.raises(ValueError, match="labels must be distinct"):
        _pairs([("x", m, m), ("x", m, m)])
    # a pair's arms on different tasks: the error names the pair
    with pytest.raises(TaskSetMismatchError, match=r"skillgate y and mixed y were evaluated on different"):
        _pairs([("x", m, m), ("y", other, m)])
    # each pair consistent, but the pairs on other tasks than each other: a task would lack a pair's trials
    with pytest.raises(TaskSetMismatchError, match=r"skillgate x and skillgate y were evaluated"):
        _pairs([("x", m, m), ("y", other, other)])
    with pytest.raises(ProtocolMismatchError):
        pooled_pairs_bootstrap([("x", m, m)], method_label="skillgate", baseline_label="mixed",
                               method_fingerprint=FP, baseline_fingerprint="b" * 64)

"""The claim's two arms pooled over every cohort that trained both: SkillGate minus mixed_task_reward, each pair
from its own SFT policy, one paired task-cluster bootstrap over all pairs (docs/method.md 9).

    .venv/bin/python benchmarks/pooled_cohorts.py \
        --cohort benchmarks/results/gpu/learning_smollm2_9a6e7f9 \
        --cohort benchmarks/results/gpu/learning_smollm2_26c74b7 \
        --json benchmarks/results/learning_pooled_cohorts.json

A cohort is the arms trained from one SFT policy (one session so far: each session retrained SFT, and the paper
build refuses to mix SFT policies). Each --cohort is one cohort's collected folders (comma-separated, or one
folder holding them), checked as the paper build checks them (learning_result.paper_inputs: one SFT policy, one
shared GRPO recipe, one copy of each method's rows). Across cohorts this script also requires one shared GRPO
recipe (steps, learning rate, group size, ...: only the profile, seed and labelled variants may differ) and one
protocol fingerprint; it refuses otherwise, naming the fields that differ.

Within a cohort, every seed at which both arms have rows is a pair (X@sN against mixed_task_reward@sN). Pairing
stays inside a cohort: a pair never meets another SFT policy's baseline. All pairs pooled: a resample draws a task
with every pair's trials of it (bootstrap.pooled_pairs_bootstrap). The claim check is the paper's (claim.py).

This pooling was chosen after the per-cohort results were seen (each interval included 0): it is a post-hoc
analysis, and its report says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# A script's preamble, alike in every benchmark: the repo on sys.path before the imports.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

import learning_result as lr  # noqa: E402

from skillgate_core.evaluation.bootstrap import paired_bootstrap, pooled_pairs_bootstrap  # noqa: E402
from skillgate_core.evaluation.claim import claim_check  # noqa: E402
from skillgate_core.evaluation.rows import group_by_protocol, read_eval_rows  # noqa: E402

METHOD = "selector_clean_oracle_action_credit"
BASELINE = "mixed_task_reward"
RESAMPLES = 10_000


def cohort_folders(text: str) -> list[Path]:
    """The folders of one --cohort value: comma-separated, each existing."""
    folders = [Path(p) for p in text.split(",") if p]
    missing = [str(f) for f in folders if not f.is_dir()]
    if not folders or missing:
        raise SystemExit(f"--cohort {text!r}: expected existing folders, missing: {missing or 'all'}")
    return folders


def method_trials(path: Path, method: str) -> Any:
    """The MethodTrials of `method` in one eval_trials.parquet (one protocol, one method expected)."""
    protocols = group_by_protocol(read_eval_rows(path))
    found = [m for methods in protocols.values() for m in methods if m.method == method]
    if len(protocols) != 1 or len(found) != 1:
        raise SystemExit(f"{path}: expected the rows of {method} on one protocol, found protocols "
                         f"{sorted(protocols)} and {len(found)} method(s) named {method}")
    return found[0]


def cohort_recipe(folders: list[Path], rows: dict[str, Path]) -> str:
    """The shared GRPO recipe (learning_result.shared_grpo_config) behind the training of each arm whose eval rows
    `rows` names (label -> its eval_trials.parquet, in eval/<label>/ of an out folder)."""
    records = lr.command_records(folders)
    recipes = {lr.shared_grpo_config(rec) for label, path in rows.items()
               for rec in lr.eval_training_records(label, path.parents[2], records)} - {""}
    if len(recipes) != 1:
        raise SystemExit(f"cohort {[str(f) for f in folders]}: expected the training records of one GRPO recipe "
                         f"behind {sorted(rows)}, found {len(recipes)}")
    return recipes.pop()


def cohort_pairs(folders: list[Path], method: str, baseline: str) -> dict[str, Any]:
    """One cohort's pairs: {sft, recipe, pairs: [(seed, method trials, baseline trials)]}."""
    inputs = lr.paper_inputs(folders)  # SystemExit unless one SFT policy and one recipe
    by_seed: dict[str, dict[int, str]] = {method: {}, baseline: {}}
    for label in inputs.eval:
        if label == lr.SFT_METHOD:
            continue
        arm = lr.parse_arm(label)
        name = "+".join((arm.kind, *arm.variants))
        if name in by_seed:
            by_seed[name][arm.seed] = label
    seeds = sorted(set(by_seed[method]) & set(by_seed[baseline]))
    if not seeds:
        raise SystemExit(f"cohort {[str(f) for f in folders]}: no seed with rows of both {method} and {baseline}")
    labels = [by_seed[side][s] for s in seeds for side in (method, baseline)]
    starts = {inputs.sft_lineage.get(label) for label in labels}
    if len(starts) != 1 or None in starts:
        raise SystemExit(f"cohort {[str(f) for f in folders]}: the arms' SFT starts are {starts}: expected one, named")
    pairs = [(s, method_trials(inputs.eval[by_seed[method][s]][0], by_seed[method][s]),
              method_trials(inputs.eval[by_seed[baseline][s]][0], by_seed[baseline][s])) for s in seeds]
    recipe = cohort_recipe(folders, {label: inputs.eval[label][0] for label in labels})
    return {"folders": [str(f) for f in folders], "sft": starts.pop(), "recipe": recipe,
            "pairs": pairs}


def one_recipe(cohorts: list[dict[str, Any]]) -> dict[str, Any]:
    """The GRPO recipe every cohort shares (SystemExit naming the fields that differ)."""
    configs = [json.loads(c["recipe"]) for c in cohorts]
    fields = sorted(k for k in set().union(*configs) if len({json.dumps(c.get(k), default=str) for c in configs}) > 1)
    if fields:
        listing = "\n".join(f"  {c['folders']}: " + ", ".join(f"{k}={cfg.get(k)!r}" for k in fields)
                            for c, cfg in zip(cohorts, configs, strict=True))
        raise SystemExit(f"the cohorts were trained under different GRPO recipes; pool only one recipe's:\n{listing}")
    return configs[0]


def _interval_text(result: Any, statistic: str) -> str:
    i = result.interval(statistic)
    return f"{100 * i.difference:+.1f} pp [{100 * i.ci_low:+.1f}, {100 * i.ci_high:+.1f}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cohort", action="append", required=True, help="one cohort's collected folders, comma-separated")
    p.add_argument("--method", default=METHOD)
    p.add_argument("--baseline", default=BASELINE)
    p.add_argument("--json", type=Path, help="write the result here")
    a = p.parse_args(argv)
    cohorts = [cohort_pairs(cohort_folders(text), a.method, a.baseline) for text in a.cohort]
    sfts = [c["sft"] for c in cohorts]
    if len(set(sfts)) != len(sfts):
        raise SystemExit(f"two --cohort values hold the same SFT policy ({sfts}): give one cohort's folders once")
    recipe = one_recipe(cohorts)
    pairs = [(f"SFT {c['sft'][:12]} seed {seed}", m, b, seed) for c in cohorts for seed, m, b in c["pairs"]]
    fingerprints = {t.fingerprint for _, m, b, _ in pairs for t in (m, b)}
    if len(fingerprints) != 1:
        raise SystemExit(f"the pairs' rows carry {len(fingerprints)} protocol fingerprints: expected one protocol")
    fingerprint = fingerprints.pop()
    common = {"method_label": a.method, "baseline_label": a.baseline, "method_fingerprint": fingerprint,
              "baseline_fingerprint": fingerprint, "k": 4, "resamples": RESAMPLES, "seed": 0, "confidence": 0.95}
    per_pair = {label: paired_bootstrap(m.trials, b.trials, arm_seeds=(seed,), **common) for label, m, b, seed in pairs}
    pooled = pooled_pairs_bootstrap([(label, m.trials, b.trials) for label, m, b, _ in pairs],
                                    arm_seeds=tuple(seed for *_, seed in pairs), **common)
    check = claim_check(pooled)
    for label, result in per_pair.items():
        print(f"{label}: success {_interval_text(result, 'trial_success')}, oracle exposure "
              f"{_interval_text(result, 'oracle_exposure')}, clean-oracle {_interval_text(result, 'clean_oracle_rate')}")
    print(f"pooled, {len(pairs)} pairs ({sum(len(m.trials) for _, m, _, _ in pairs)} trials a side): success "
          f"{_interval_text(pooled, 'trial_success')}, oracle exposure {_interval_text(pooled, 'oracle_exposure')}, "
          f"clean-oracle {_interval_text(pooled, 'clean_oracle_rate')}")
    print(check.line("Claim check, pooled over cohorts (post hoc)"))
    if a.json:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        out = {"command": " ".join(["benchmarks/pooled_cohorts.py", *(argv if argv is not None else sys.argv[1:])]),
               "commit": commit, "post_hoc": True, "method": a.method, "baseline": a.baseline,
               "fingerprint": fingerprint, "recipe": recipe,
               "cohorts": [{"folders": c["folders"], "sft": c["sft"], "seeds": [s for s, _, _ in c["pairs"]]}
                           for c in cohorts],
               "per_pair": {label: r.to_json() for label, r in per_pair.items()},
               "pooled": pooled.to_json(), "claim": check.to_json()}
        a.json.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

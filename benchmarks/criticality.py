"""Skill-criticality of the bundled families, measured through real sandboxes and verifiers.

    .venv/bin/python benchmarks/criticality.py                 # writes benchmarks/results/criticality.{md,json}
    .venv/bin/python benchmarks/criticality.py --per-family 20 --bench DIR

Builds the default suite (seed 0) unless --bench names one, samples --per-family tasks per family
(over all splits, seeded), and runs seven scripted agents on each in a fresh bubblewrap sandbox with
the task's 16 slate skills at /skills: the oracle follower (reads the oracle's SKILL.md, runs its
```bash procedure), one follower per misleading strategy, and the no-skill agent (a generic naive
attempt). Success = the task's own verifier scores 1. Skill-critical means: oracle >= 0.95 and
every other agent <= 0.10, per family. Exit 1 if any threshold breaks.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

# A script's preamble, alike in every benchmark: the repo on sys.path before the imports.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_gate import machine  # noqa: E402

from skillgate_core.benchgen import BenchBuildConfig, build_suite, suite_digest  # noqa: E402
from skillgate_core.benchgen.criticality import (  # noqa: E402
    AGENTS,
    ORACLE_MIN,
    OTHERS_MAX,
    criticality_markdown,
    criticality_problems,
    measure_criticality,
)
from skillgate_core.benchgen.families import STRATEGY_LABELS  # noqa: E402
from warehouse.provenance import git_state  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, help="an existing suite (default: build the default seed-0 suite)")
    parser.add_argument("--seed", type=int, default=0, help="suite seed when building")
    parser.add_argument("--per-family", type=int, default=10, help="tasks sampled per family")
    parser.add_argument("--jobs", type=int, default=2, help="episodes run at once")
    parser.add_argument("--out", type=Path, default=RESULTS / "criticality", help="output path without suffix")
    args = parser.parse_args()
    git = git_state(REPO)
    with tempfile.TemporaryDirectory(prefix="skillgate-criticality-") as scratch:
        bench = args.bench
        if bench is None:
            print("building the default suite ...", flush=True)
            bench = build_suite(BenchBuildConfig(seed=args.seed), Path(scratch) / "bench", workers=2).path
        started = time.perf_counter()
        report = measure_criticality(bench, per_family=args.per_family, backend="bwrap", jobs=args.jobs)
        seconds = round(time.perf_counter() - started, 1)
        digest = suite_digest(bench)
        seed = json.loads((bench / "suite.json").read_text())["seed"]
    problems = criticality_problems(report)
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "git_commit": git.sha,
            "git_dirty": git.dirty, "machine": machine(), "suite_seed": seed, "suite_digest": digest,
            "per_family": args.per_family, "backend": "bwrap", "seconds": seconds, "problems": problems}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({**meta, **report.to_json()}, indent=2, sort_keys=True) + "\n")
    legend = "\n".join(f"- `{s}`: follows the lookalike with the {label}" for s, label in STRATEGY_LABELS.items())
    markdown = f"""# Skill-criticality of the bundled task families

Success rate (verifier score 1) of scripted agents on {args.per_family} sampled tasks per family of the
seed-{seed} suite (digest `{digest[:16]}`), each episode in a fresh bubblewrap sandbox with the task's 16
slate skills mounted at /skills, graded by the task's own verifier.

{criticality_markdown(report)}
- `oracle`: reads the oracle skill's SKILL.md and runs its ```bash procedure (threshold >= {ORACLE_MIN})
{legend}
- `no-skill`: reads no skill; runs the family's generic naive attempt
- every column but `oracle` must stay <= {OTHERS_MAX}; aborted episodes: {report.errors}
- verdict: {"all thresholds hold" if not problems else "; ".join(problems)}

Rerun: `{meta['command']}` ({len(report.episodes)} episodes, {seconds} s).
Commit `{git.sha[:12]}`{" (dirty tree)" if git.dirty else ""}; machine: {meta['machine']['cpus']} CPUs,
{meta['machine']['memory_gib']} GiB, kernel {meta['machine']['kernel']}, load {meta['machine']['load_avg_1m']}.
"""
    args.out.with_suffix(".md").write_text(markdown)
    print(markdown)
    assert set(AGENTS) >= set(next(iter(report.table.values())))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

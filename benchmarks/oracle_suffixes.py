"""Which suffix names the oracle, per family, in the bench's own names and under renamed slates.

    .venv/bin/python benchmarks/oracle_suffixes.py --bench DIR                # the train split, 20 renamings a task
    .venv/bin/python benchmarks/oracle_suffixes.py --bench DIR --split eval70_v1 --json out.json

Builds the default suite (seed 0) unless --bench names one. A skill name is `<codename>-<noun>-<suffix>`
and the oracle shares codename and noun with its five lookalikes, so its suffix is the one part of its
name that could single it out. Benches built before the balanced draws (suite digest fd9c4f93 for the
default) drew it per skill, and over one split's few skills the draws were skewed: `-steps` named 33% of
the training planning oracles and none of eval70_v1's. The bench now deals it (benchgen.balanced_draws):
the `bench` column of the training split is 16.7% for every suffix of every family, and a held-out split's
four skills per family use four of its six suffixes (4-5 eval70_v1 tasks each). `skillgate bench audit`
checks the same counts and fits predictors to them. Three columns per family and suffix, as a share of
the split's tasks (renamed: of tasks x --copies): `bench` (the names as built), `codename` (each task's
slate renamed --copies times by skills.aliases.alias_names with shuffle_suffixes=False, the augmentation
before the suffix shuffle) and `shuffled` (shuffle_suffixes=True). Each renaming has the bench's library
as `taken`, as collect and rl-data-prep do.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

# A script's preamble, alike in every benchmark: the repo on sys.path before the imports.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillgate_core.envs.bench_index import load_bench_rows  # noqa: E402
from skillgate_core.formats.slate_manifest import MANIFEST_FILE  # noqa: E402
from skillgate_core.skills import read_slate  # noqa: E402
from skillgate_core.skills.aliases import alias_names, lookalike_groups  # noqa: E402

COLUMNS = ("bench", "codename", "shuffled")


def oracle_suffix(oracle: str, names: list[str]) -> str:
    """The oracle's suffix: its name past the `<codename>-<noun>-` it shares with its lookalikes."""
    for group, members in lookalike_groups(names).items():
        if oracle in members:
            return oracle[len(group):]
    raise ValueError(f"{oracle}: not a `<codename>-<noun>-<suffix>` name of the slate {names}")


def suffix_counts(bench: Path, split: str, copies: int, seed: int = 0) -> dict[str, dict[str, Counter[str]]]:
    """{family: {column: Counter(oracle suffix)}} over the split's tasks (module docstring)."""
    library = sorted(p.name for p in (bench / "skills").iterdir())
    counts: dict[str, dict[str, Counter[str]]] = {}
    for row in load_bench_rows(bench, split):
        slate = read_slate(bench / row["path"] / MANIFEST_FILE)
        if slate.oracle is None:
            raise ValueError(f"{bench / row['path'] / MANIFEST_FILE}: no oracle entry")
        names = list(slate.names)
        family = counts.setdefault(row["family"], {c: Counter() for c in COLUMNS})
        family["bench"][oracle_suffix(slate.oracle, names)] += 1
        for column, shuffle in (("codename", False), ("shuffled", True)):
            rng = random.Random(f"oracle-suffixes::{seed}::{row['task_id']}::{column}")
            for _ in range(copies):
                mapping = alias_names(names, rng, taken=library, shuffle_suffixes=shuffle)
                family[column][oracle_suffix(mapping[slate.oracle], list(mapping.values()))] += 1
    return dict(sorted(counts.items()))


def shares(counts: dict[str, dict[str, Counter[str]]]) -> dict[str, dict[str, dict[str, float]]]:
    """{family: {suffix: {column: share of the column's draws}}}, suffixes by their `bench` share."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for family, columns in counts.items():
        totals = {c: sum(columns[c].values()) or 1 for c in COLUMNS}
        suffixes = sorted(set().union(*columns.values()), key=lambda s: (-columns["bench"][s], s))
        out[family] = {s: {c: round(columns[c][s] / totals[c], 4) for c in COLUMNS} for s in suffixes}
    return out


def table(split: str, counts: dict[str, dict[str, Counter[str]]]) -> str:
    lines = [f"oracle suffix per family, split {split} (share of tasks; renamed: of tasks x copies)",
             f"{'family':<12} {'suffix':<16} {'tasks':>5} " + " ".join(f"{c:>9}" for c in COLUMNS)]
    for family, rows in shares(counts).items():
        tasks = sum(counts[family]["bench"].values())
        for suffix, row in rows.items():
            lines.append(f"{family:<12} {suffix:<16} {tasks:>5} " + " ".join(f"{row[c]:>9.1%}" for c in COLUMNS))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, help="an existing suite (default: build the default seed-0 suite)")
    parser.add_argument("--split", default="train", help="bench split (train, eval70_v1, slate147)")
    parser.add_argument("--copies", type=int, default=20, help="renamings drawn per task")
    parser.add_argument("--seed", type=int, default=0, help="seed of the renamings")
    parser.add_argument("--json", type=Path, help="also write {split, copies, seed, families: shares} here")
    args = parser.parse_args()
    if args.copies < 1:
        parser.error(f"--copies: expected at least 1, got {args.copies}")
    with tempfile.TemporaryDirectory(prefix="skillgate-oracle-suffixes-") as scratch:
        bench = args.bench
        if bench is None:
            from skillgate_core.benchgen import BenchBuildConfig, build_suite

            print("building the default suite ...", flush=True)
            bench = build_suite(BenchBuildConfig(seed=0), Path(scratch) / "bench", workers=2).path
        counts = suffix_counts(bench, args.split, args.copies, args.seed)
    print(table(args.split, counts))
    if args.json:
        args.json.write_text(json.dumps({"split": args.split, "copies": args.copies, "seed": args.seed,
                                         "tasks": {f: sum(c["bench"].values()) for f, c in counts.items()},
                                         "families": shares(counts)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

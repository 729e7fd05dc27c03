"""How far word matching gets at picking the oracle: a reader that ranks a task's slate by the words its
instruction shares with each skill's description, per split.

    .venv/bin/python benchmarks/lexical_selection.py --bench DIR --json out.json

Builds the default suite (seed 0) unless --bench names one. For every task of every split: the instruction
(instruction.md) against the descriptions of its frozen slate (skills.json), cut as the prompt shows them
(PromptProfile.description_chars), names left out (renamed slates make them arbitrary). Two scorers: BM25
(rank_bm25.BM25Okapi over the compared descriptions, the retrieval tokenizer) and the count of distinct words
shared. Two scopes: the whole 16-skill slate (chance 1/16, the selection probe's scope) and the oracle's cluster
(the oracle and its five lookalikes, chance 1/6: where the learning result's policies fail,
benchmarks/results/gpu/learning_smollm2_26c74b7/README.md). oracle@1 counts a tie at the top as 1/k for k tied.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

# A script's preamble, alike in every benchmark: the repo on sys.path before the imports.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillgate_core.agent.prompts import PromptProfile  # noqa: E402
from skillgate_core.envs.bench_index import load_bench_rows  # noqa: E402
from skillgate_core.formats.slate_manifest import MANIFEST_FILE  # noqa: E402
from skillgate_core.skills import read_slate  # noqa: E402
from skillgate_core.skills.retrieval import tokenize  # noqa: E402

SPLITS = ("train", "eval70_v1", "slate147")
SCOPES = {"slate": 1 / 16, "cluster": 1 / 6}
"""Each scope with its chance oracle@1."""


def oracle_at_1(scores: list[float], oracle: int) -> float:
    """1/k if the oracle is among the k best scores, else 0."""
    best = max(scores)
    top = [i for i, s in enumerate(scores) if s == best]
    return 1 / len(top) if oracle in top else 0.0


def lexical_scores(instruction: str, descriptions: list[str]) -> dict[str, list[float]]:
    """{"bm25": .., "shared_words": ..}: each description's score for the instruction."""
    from rank_bm25 import BM25Okapi

    docs = [tokenize(d) for d in descriptions]
    query = tokenize(instruction)
    words = set(query)
    return {"bm25": [float(s) for s in BM25Okapi(docs).get_scores(query)],
            "shared_words": [float(len(words & set(d))) for d in docs]}


def split_rates(bench: Path, split: str, description_chars: int) -> dict:
    """{tasks, <scope>: {chance, bm25, shared_words}} over the split's tasks: mean oracle@1."""
    rows = load_bench_rows(bench, split)
    sums = {scope: {"bm25": 0.0, "shared_words": 0.0} for scope in SCOPES}
    for row in rows:
        slate = read_slate(bench / row["path"] / MANIFEST_FILE)
        instruction = (bench / row["path"] / "instruction.md").read_text()
        for scope in SCOPES:
            entries = [e for e in slate.entries if scope == "slate" or e.category in ("oracle", "misleading")]
            oracle = next(i for i, e in enumerate(entries) if e.category == "oracle")
            scores = lexical_scores(instruction, [e.description[:description_chars] for e in entries])
            for scorer, values in scores.items():
                sums[scope][scorer] += oracle_at_1(values, oracle)
    n = len(rows)
    return {"tasks": n, **{scope: {"chance": round(SCOPES[scope], 4),
                                   **{k: round(v / n, 4) if n else None for k, v in sums[scope].items()}}
                           for scope in SCOPES}}


def present_splits(bench: Path) -> set[str]:
    """The splits tasks.jsonl has rows of (a small bench may lack one)."""
    lines = (bench / "tasks.jsonl").read_text().splitlines()
    return {json.loads(line).get("split") for line in lines if line.strip()}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", default="", help="a built suite (default: build the default suite here)")
    p.add_argument("--json", default="", help="write the result here too")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        bench = Path(a.bench) if a.bench else Path(scratch) / "bench"
        if not a.bench:
            from skillgate_core.benchgen import BenchBuildConfig, build_suite

            build_suite(BenchBuildConfig(), bench)
        from skillgate_core.benchgen.suite import suite_digest

        chars = PromptProfile().description_chars
        result = {"bench": str(a.bench or "default suite, seed 0"), "suite_digest": suite_digest(bench),
                  "description_chars": chars,
                  "splits": {s: split_rates(bench, s, chars) for s in SPLITS if s in present_splits(bench)}}
    text = json.dumps(result, indent=2)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return result


if __name__ == "__main__":
    main()

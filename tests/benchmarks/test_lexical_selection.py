"""benchmarks/lexical_selection.py: a word-matching reader's oracle@1 on a built bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import lexical_selection  # noqa: E402


def test_a_tie_at_the_top_counts_one_over_the_tied():
    assert lexical_selection.oracle_at_1([1.0, 3.0, 3.0, 0.0], oracle=1) == 0.5
    assert lexical_selection.oracle_at_1([1.0, 3.0, 3.0, 0.0], oracle=0) == 0.0
    assert lexical_selection.oracle_at_1([5.0, 3.0], oracle=0) == 1.0


def test_the_description_sharing_the_instruction_s_words_ranks_first():
    scores = lexical_selection.lexical_scores(
        "Assign partitions to archive volumes under policy revision 4; write archive/placement.csv.",
        ["Deploy runbooks for the ingest service.",
         "Assign partitions to archive volumes, policy revision 4, output archive/placement.csv.",
         "Assign partitions to archive volumes, policy revision 3, output archive/layout.csv."])
    assert lexical_selection.oracle_at_1(scores["bm25"], 1) == 1.0
    assert lexical_selection.oracle_at_1(scores["shared_words"], 1) == 1.0


def test_every_split_of_a_bench_is_scored_in_both_scopes(bench, tmp_path):
    out = tmp_path / "lexical.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "lexical_selection.py"), "--bench", str(bench),
                    "--json", str(out)], check=True, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    rows = [json.loads(line) for line in (bench / "tasks.jsonl").read_text().splitlines() if line.strip()]
    expected = {r["split"] for r in rows}
    assert set(result["splits"]) == expected
    for split, rates in result["splits"].items():
        assert rates["tasks"] == sum(r["split"] == split for r in rows)
        assert rates["slate"]["chance"] == 0.0625 and rates["cluster"]["chance"] == 0.1667
        for scope in ("slate", "cluster"):
            assert 0.0 <= rates[scope]["bm25"] <= 1.0 and 0.0 <= rates[scope]["shared_words"] <= 1.0

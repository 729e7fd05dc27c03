"""The selection probe (evaluation/probe.py): teacher-forced scores of the 16 slate names as the first
read, on a real tiny policy and a real bench; the CLI, the eval70 stage output and the paper column."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from support.skillgate_cli import run_skillgate
from transformers import AutoModelForCausalLM, AutoTokenizer

from skillgate_core.evaluation.probe import (
    PROBE_SUMMARY_FILE,
    ProbeConfig,
    probe_selection,
    read_probe_summaries,
    score_candidates,
    summarize_probe,
)
from skillgate_core.evaluation.specs import build_protocol, load_spec


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_shared_prefix_scores_equal_one_forward_per_candidate(arch, tiny_model_dir, tiny_llama_dir):
    folder = tiny_llama_dir if arch == "llama" else tiny_model_dir
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    prompt = tok("read the skill that merges tables", add_special_tokens=False)["input_ids"]
    conts = [tok(f'"/skills/{n}/SKILL.md"', add_special_tokens=False)["input_ids"]
             for n in ("csv-merge", "csv-merge-fast", "pdf", "x")]
    got = score_candidates(model, prompt, conts)
    for cont, score in zip(conts, got, strict=True):
        with torch.no_grad():
            logp = F.log_softmax(model(torch.tensor([prompt + cont])).logits[0].float(), -1)
        want = sum(float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(cont))
        assert score == pytest.approx(want, abs=1e-3)


def test_probe_rows_are_a_choice_among_the_slate(tiny_llama_dir, bench):
    resolved = build_protocol(load_spec("eval70_v1"), bench)
    result = probe_selection(resolved, tiny_llama_dir, ProbeConfig(resamples=500), progress=False)
    assert len(result.rows) == len(resolved.tasks) == 4
    for row, task in zip(result.rows, resolved.tasks, strict=True):
        assert row["names"] == [e.name for e in task.slate.entries] and len(row["names"]) == 16
        assert math.isclose(sum(row["probs"]), 1.0, rel_tol=1e-9)
        assert math.isclose(sum(row[f"{c}_mass"] for c in ("oracle", "misleading", "relevant", "irrelevant")), 1.0)
        best = max(range(16), key=lambda i: row["logprobs"][i])
        assert (row["oracle_rank"] == 1) == (row["names"][best] == row["oracle"])
        assert row["top_name"] == row["names"][best]
        cluster = [i for i, c in enumerate(row["categories"]) if c in ("oracle", "misleading")]
        assert len(cluster) == 6
        assert math.isclose(row["oracle_given_cluster"], row["oracle_mass"] / sum(row["probs"][i] for i in cluster))
        assert row["cluster_rank1"] == (max(cluster, key=lambda i: row["logprobs"][i]) == row["names"].index(row["oracle"]))
    s = result.summary
    assert s["tasks"] == 4 and s["chance"] == 1 / 16 and s["protocol_id"] == resolved.protocol.protocol_id()
    assert s["cluster_chance"] == 1 / 6
    assert math.isclose(s["oracle_given_cluster"], sum(r["oracle_given_cluster"] for r in result.rows) / 4)
    assert s["oracle_rank1_ci"][0] <= s["oracle_rank1_rate"] <= s["oracle_rank1_ci"][1]
    assert sum(b["tasks"] for b in s["by_benchmark"].values()) == 4


def test_summary_counts_rank_one_and_bootstraps_over_tasks():
    rows = [{"benchmark": "a" if i < 6 else "b", "oracle_rank": 1 if i % 3 == 0 else 4, "names": ["n"] * 16,
             "oracle_mass": 0.5, "misleading_mass": 0.3, "relevant_mass": 0.1, "irrelevant_mass": 0.1}
            for i in range(9)]
    s = summarize_probe(rows, ProbeConfig(resamples=2000))
    assert s["oracle_rank1"] == 3 and s["oracle_rank1_rate"] == pytest.approx(1 / 3)
    assert s["by_benchmark"]["a"]["oracle_rank1"] == 2 and s["by_benchmark"]["b"]["oracle_rank1"] == 1
    low, high = s["oracle_rank1_ci"]
    assert 0.0 <= low < 1 / 3 < high <= 1.0
    assert summarize_probe(rows, ProbeConfig(resamples=2000)) == s  # seeded


def test_cli_probe_writes_rows_and_summary_the_paper_reads(tmp_path, tiny_model_dir, bench):
    out = tmp_path / "probe"
    done = run_skillgate("eval", "probe", "--policy", str(tiny_model_dir), "--bench", str(bench), "--out", str(out),
                         "--max-tasks", "2", "--device", "cpu", "--method", "tiny", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "oracle rank-1 rate" in done.stdout and "selection probe" in done.stdout
    summary = json.loads((out / PROBE_SUMMARY_FILE).read_text())
    assert summary["tasks"] == 2 and summary["method"] == "tiny"
    assert read_probe_summaries(tmp_path)[(summary["fingerprint"], "tiny")]["tasks"] == 2
    bad = run_skillgate("eval", "probe", "--policy", str(tmp_path), "--bench", str(bench), home=tmp_path / "home")
    assert bad.returncode != 0 and "no config.json" in bad.stdout + bad.stderr


def test_the_held_in_probe_scores_the_names_a_renamed_training_prompt_shows(tiny_model_dir, bench, tmp_path):
    import json

    from skillgate_core.base.parquet_rows import read_rows
    from skillgate_core.evaluation.probe import load_probe_model, probe_training_rows
    from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data

    rl = prepare_rl_data(RLDataPrepConfig(profile="mixed_task_reward", renamed_rate=1.0),
                         {"bench": bench, "sft_model": tiny_model_dir}, tmp_path / "rl")
    rows = read_rows(rl.outputs["rl_data"])[:3]
    assert all(r["skill_aliases"] and r["selection_cue"] for r in rows)
    model, tok = load_probe_model(tiny_model_dir, ProbeConfig(device="cpu"))
    probed = probe_training_rows(model, tok, rows, "reasoning")
    for row, raw in zip(probed, rows, strict=True):
        aliases = json.loads(raw["skill_aliases"])
        assert row["oracle"] == aliases[raw["gold_name"]] and row["oracle"] in row["names"]
        assert raw["gold_name"] not in row["names"], "the bench names are not what the prompt shows"
        assert 0.0 < row["oracle_given_cluster"] < 1.0
    # the evidence is part of the scored turn: without it the scores differ
    plain = probe_training_rows(model, tok, rows, "reasoning", evidence=False)
    assert plain[0]["logprobs"] != probed[0]["logprobs"]

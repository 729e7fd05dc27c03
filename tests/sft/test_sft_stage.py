"""The sft stage: TRL SFTTrainer + LoRA + merge on real collected trajectories."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from skillgate_core.agent.collect import CollectConfig, collect_trajectories
from skillgate_core.benchgen import BenchBuildConfig, build_suite
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model
from skillgate_core.sft.trainer import SFTStageConfig, sft_rows, train_sft


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sft-inputs")
    bench = root / "bench"
    build_suite(BenchBuildConfig(seed=3, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4,
                                 slate_tasks=4), bench)
    model = build_tiny_model(TinyModelConfig(vocab_size=1500, corpus_lines=1500, hidden_size=32), {}, root).outputs
    (root / "collect").mkdir()
    traj = collect_trajectories(CollectConfig(max_tasks=3, misleading_rate=0.34, seed=1),
                                {"bench": bench, "base_model": model["base_model"]}, root / "collect")
    return {"base_model": model["base_model"], "trajectories": traj.outputs["trajectories"]}


def test_rows_are_the_trajectory_token_streams(inputs):
    import polars as pl

    df = pl.read_parquet(inputs["trajectories"] / "trajectories.parquet")
    rows = sft_rows(inputs["trajectories"], only_resolved=False, max_length=100_000)
    assert len(rows) == df.height
    for row, traj in zip(rows, df.iter_rows(named=True), strict=True):
        assert row["input_ids"] == traj["prompt_ids"] + traj["response_ids"]
        assert sum(row["assistant_masks"]) == sum(traj["loss_mask"])
    resolved = sft_rows(inputs["trajectories"], only_resolved=True, max_length=100_000)
    assert len(resolved) == int((df["score"] >= 1).sum()) >= 1
    with pytest.raises(ValueError, match="raise sft.max_length"):
        sft_rows(inputs["trajectories"], only_resolved=True, max_length=50)


@pytest.mark.slow  # ~7 s; by default: test_llama_shape's LoRA case (train_sft merges, no adapter left, q_proj
# changed) and test_baselines' BC (the same train_lora_sft on this Qwen2 shape, the update in the merged weights)
def test_lora_sft_trains_and_merges_into_a_plain_model(inputs, tmp_path):
    from transformers import AutoModelForCausalLM

    out = train_sft(SFTStageConfig(max_steps=3, per_device_batch_size=1, learning_rate=5e-3), inputs, tmp_path)
    model_dir = out.outputs["sft_model"]
    assert out.metrics["steps"] == 3 and out.metrics["first_loss"] is not None
    merged = AutoModelForCausalLM.from_pretrained(model_dir)
    base = AutoModelForCausalLM.from_pretrained(inputs["base_model"])
    assert not any("lora" in name for name, _ in merged.named_parameters())  # merged: no adapter left
    changed = [n for (n, p), (_, q) in zip(merged.named_parameters(), base.named_parameters(), strict=True)
               if not (p - q).abs().max().item() == 0]
    assert any("q_proj" in n for n in changed), "LoRA updates must land in the merged weights"
    assert json.loads((tmp_path / "sft_summary.json").read_text())["rows"] >= 1


def test_full_weight_sft_trains_every_weight_and_lowers_the_loss(inputs, tmp_path):
    """full_weights: no adapter; the embeddings and the output head change too (LoRA leaves them random on a
    from-scratch base), the warm-up holds the first step's rate below the peak, and the loss falls."""
    from transformers import AutoModelForCausalLM

    # 6 steps (3 passes over the 2 rows) lower the loss by ~0.5 here (12 steps: ~1.3, twice the time)
    config = SFTStageConfig(max_steps=6, per_device_batch_size=1, learning_rate=3e-3, full_weights=True,
                            warmup_steps=2)
    out = train_sft(config, inputs, tmp_path)
    assert out.metrics["weights"] == "full" and out.metrics["steps"] == 6
    assert out.metrics["last_loss"] < out.metrics["first_loss"]
    trained = dict(AutoModelForCausalLM.from_pretrained(out.outputs["sft_model"]).named_parameters())
    base = dict(AutoModelForCausalLM.from_pretrained(inputs["base_model"]).named_parameters())
    assert trained.keys() == base.keys()
    unchanged = [n for n in base if (trained[n] - base[n]).abs().max().item() == 0]
    assert not [n for n in unchanged if "embed_tokens" in n or "lm_head" in n or "proj" in n], unchanged


def test_renamed_copies_follow_each_trajectory_under_fresh_names(inputs, tmp_path):
    import polars as pl
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(inputs["base_model"])
    df = pl.read_parquet(inputs["trajectories"] / "trajectories.parquet").filter(pl.col("score") >= 1)
    plain = sft_rows(inputs["trajectories"], only_resolved=True, max_length=100_000)
    rows = sft_rows(inputs["trajectories"], only_resolved=True, max_length=100_000, renamed_copies=2,
                    tokenizer=tokenizer, seed=4)
    assert len(rows) == 3 * len(plain) == 3 * df.height
    for k, traj in enumerate(df.iter_rows(named=True)):
        original, copies = rows[3 * k], rows[3 * k + 1: 3 * k + 3]
        assert original == plain[k]
        for copy in copies:
            text = tokenizer.decode(copy["input_ids"])
            assert not [n for n in traj["slate_names"] if n in text]  # every slate name renamed
            trained = tokenizer.decode([t for t, m in zip(copy["input_ids"], copy["assistant_masks"], strict=True) if m])
            assert "<tool_call>" in trained and "/skills/" in trained  # the teacher's read, still trained
        assert copies[0]["input_ids"] != copies[1]["input_ids"]
    # the teacher read the oracle: in the copies its suffix moves within its lookalike group (shuffle_suffixes,
    # the default), and stays without the shuffle
    for shuffle, rows_ in ((True, rows), (False, sft_rows(inputs["trajectories"], only_resolved=True,
                                                           max_length=100_000, renamed_copies=2, tokenizer=tokenizer,
                                                           seed=4, shuffle_suffixes=False))):
        read_suffixes = []
        for k, traj in enumerate(df.iter_rows(named=True)):
            for copy in rows_[3 * k + 1: 3 * k + 3]:
                trained = tokenizer.decode([t for t, m in zip(copy["input_ids"], copy["assistant_masks"],
                                                              strict=True) if m])
                read = re.search(r"/skills/([a-z0-9-]+)/SKILL\.md", trained)
                assert read is not None
                read_suffixes.append(read.group(1).split("-", 2)[2] == traj["gold"].split("-", 2)[2])
        assert all(read_suffixes) != shuffle, read_suffixes
    with pytest.raises(ValueError, match="needs the policy's tokenizer"):
        sft_rows(inputs["trajectories"], only_resolved=True, max_length=100_000, renamed_copies=1)
    out = train_sft(SFTStageConfig(max_steps=1, per_device_batch_size=1, renamed_copies=1, full_weights=True),
                    inputs, tmp_path)
    assert out.metrics["rows"] == 2 * df.height
    assert json.loads((tmp_path / "sft_summary.json").read_text())["rows"] == 2 * df.height

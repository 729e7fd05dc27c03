"""The entry flow under a real Prefect test server, running the real init-model stage."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("prefect_server")

SMALL = ["init-model.corpus_lines=300", "init-model.vocab_size=600", "init-model.hidden_size=32"]
DEMO_SMALL = ["bench-build.eval_tasks=4", "bench-build.slate_tasks=4", "bench-build.train_tasks_per_skill=1",
              "collect.max_tasks=2", "collect.repeats=1", "collect.misleading_rate=0.0", "sft.max_steps=1",
              "sft.per_device_batch_size=1", "sft.max_length=100000"]


def test_entry_flow_runs_a_real_stage_and_reuses_it(skillgate_home: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from flows.skillgate import skillgate

    result = skillgate(recipe="init-model", overrides=SMALL, trigger="test")
    record = result["stages"]["init-model"]
    assert record["status"] == "completed"
    model_dir = Path(record["outputs"]["base_model"])
    assert model_dir.is_relative_to(skillgate_home), "stage outputs must live under SKILLGATE_HOME"
    assert len(record["output_digests"]["base_model"]) == 64

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.model_type == "qwen2" and model.config.hidden_size == 32
    text = tok.apply_chat_template([{"role": "user", "content": "list /skills"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level BPE round-trips

    again = skillgate(recipe="init-model", overrides=SMALL, trigger="test")["stages"]["init-model"]
    assert again["status"] == "reused" and again["out_dir"] == record["out_dir"]


def test_entry_flow_reports_unbuilt_stages_without_output(skillgate_home: Path):
    from flows.skillgate import skillgate

    result = skillgate(recipe="demo", overrides=SMALL + DEMO_SMALL, trigger="test")
    stages = result["stages"]
    assert stages["init-model"]["status"] in {"completed", "reused"}
    for built in ("bench-build", "collect", "sft", "rl-data-prep"):
        assert stages[built]["status"] == "completed", (built, stages[built])
    assert stages["collect"]["metrics"]["episodes"] == 2
    # rl-data-prep renders its prompts with the SFT model the sft stage just wrote (lineage by role).
    assert stages["rl-data-prep"]["inputs"]["sft_model"] == stages["sft"]["outputs"]["sft_model"]
    assert stages["rl-data-prep"]["metrics"]["tasks"] == 16
    unbuilt = [s for s, r in stages.items() if r["status"] == "not-built"]
    # paper-tables is built but has nothing to read while eval70 is not: skipped, nothing written.
    assert stages["paper-tables"]["status"] in {"skipped", "completed"}
    if stages["paper-tables"]["status"] == "skipped":
        assert stages["paper-tables"]["note"] == "missing inputs: eval_rows"
        assert not (skillgate_home / "artifacts" / "paper-tables").exists()
    for stage in unbuilt:
        assert "not built yet" in stages[stage]["note"]
        assert not (skillgate_home / "artifacts" / stage).exists()

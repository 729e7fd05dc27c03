"""What a model folder says it was trained to, and the line an evaluation prints when the protocol allows
more: a model's config.json, a tokenizer-only folder's model_max_length (transformers' "no limit" value is
no limit), nothing known."""

from __future__ import annotations

import json

from skillgate_core.evaluation.context_limit import context_warning, model_context_limit
from skillgate_core.evaluation.specs import build_protocol, load_spec


def test_a_model_folder_gives_its_positions(tiny_model_dir):
    assert model_context_limit(tiny_model_dir) == json.loads((tiny_model_dir / "config.json").read_text())[
        "max_position_embeddings"]


def test_a_tokenizer_only_folder_gives_its_model_max_length_and_no_limit_is_none(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8192}))
    assert model_context_limit(tmp_path) == 8192
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": int(1e30)}))
    assert model_context_limit(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text("[not an object")
    assert model_context_limit(tmp_path) is None
    assert model_context_limit(tmp_path / "absent") is None


def test_the_warning_names_both_sizes_and_a_protocol_that_fits_only_when_it_does_not(bench):
    eval70 = build_protocol(load_spec("eval70_v1"), bench, demo_repeats=1).protocol
    line = context_warning(eval70, 8192, "the model at M")
    assert f"allows {eval70.context_size:,} context tokens, the model at M was trained to 8,192 positions" in line
    assert "eval70_v1_ctx8k" in line
    assert context_warning(eval70, eval70.context_size, "the model at M") == ""
    assert context_warning(eval70, None, "the model at M") == ""

"""Shared session fixtures: a real tiny Qwen2 policy (init-model code) and a small real bench
(bench-build code), built once per session by the test packages that import them."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model

__all__ = ["SMALL_BENCH", "TINY_LLAMA", "bench", "tiny_llama_dir", "tiny_model_dir", "tiny_policy_dir"]

SMALL_BENCH = dict(seed=5, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=4, slate_tasks=4)
"""BenchBuildConfig fields of the small bench: 16 training tasks (one per family x domain), 4 eval70_v1 and 4
slate147 tasks. Kept as fields so that importing these fixtures does not import the bench builder (polars):
the policy tests run on the GPU machine, which lacks it (docs/gpu.md)."""


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised Qwen2 model + tokenizer, written by the project's tiny-model code."""
    out = tmp_path_factory.mktemp("tiny-model")
    config = TinyModelConfig(vocab_size=600, corpus_lines=300, hidden_size=32, intermediate_size=64)
    return build_tiny_model(config, {}, out).outputs["base_model"]


TINY_LLAMA = TinyModelConfig(vocab_size=600, corpus_lines=300, hidden_size=36, intermediate_size=64,
                             num_attention_heads=9, num_key_value_heads=3, architecture="llama")
"""SmolLM2's shape in miniature: Llama, no attention bias, 9 query heads over 3 KV heads (head dim 4)."""


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A randomly initialised Llama model + tokenizer: the pretrained policy's code path at test size."""
    out = tmp_path_factory.mktemp("tiny-llama")
    return build_tiny_model(TINY_LLAMA, {}, out).outputs["base_model"]


@pytest.fixture(params=["qwen2", "llama"])
def tiny_policy_dir(request) -> Path:
    """Both tiny shapes in turn: Qwen2 (the demo's) and Llama (SmolLM2's), for the paths each must run."""
    return request.getfixturevalue("tiny_llama_dir" if request.param == "llama" else "tiny_model_dir")


@pytest.fixture(scope="session")
def bench(tmp_path_factory) -> Path:
    from skillgate_core.benchgen import BenchBuildConfig, build_suite

    out = tmp_path_factory.mktemp("bench") / "bench"
    build_suite(BenchBuildConfig(**SMALL_BENCH), out)
    return out

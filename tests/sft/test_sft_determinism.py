"""Deterministic SFT (sft.determinism): two trainings on the same rows give the same weights digest, and an op
without a deterministic kernel makes the training start over with the default algorithms, said in the summary.

On a GPU machine this file is the check that SFT repeats there (benchmarks/gpu/smollm2.sh runs it in carry1):
the tiny Llama below has SmolLM2's head size (64), so attention takes the same CUDA kernels."""

from __future__ import annotations

import random

import pytest
import torch

from skillgate_core.base.digests import path_sha256
from skillgate_core.policy.tiny_model import TinyModelConfig, build_tiny_model
from skillgate_core.sft.determinism import train_deterministically
from skillgate_core.sft.trainer import SFTStageConfig, train_lora_sft

HEAD_64_LLAMA = TinyModelConfig(vocab_size=600, corpus_lines=300, hidden_size=128, intermediate_size=256,
                                num_attention_heads=2, num_key_value_heads=1, architecture="llama")
"""Llama with SmolLM2's head size (64) and GQA, at test size."""


@pytest.fixture(scope="module")
def llama64(tmp_path_factory):
    return build_tiny_model(HEAD_64_LLAMA, {}, tmp_path_factory.mktemp("llama64")).outputs["base_model"]


def _rows(vocab: int) -> list[dict[str, list[int]]]:
    """Rows of different lengths (batches are padded, as in the stage) whose tokens repeat, so the embedding's
    backward adds many gradients into the same rows: where a GPU's atomics would reorder sums."""
    rng = random.Random(0)
    rows = []
    for length in (180, 260, 220, 300):
        ids = [rng.randrange(3, 40) for _ in range(length)]
        rows.append({"input_ids": ids, "assistant_masks": [0] * (length // 2) + [1] * (length - length // 2)})
    return rows


def test_two_trainings_on_the_same_rows_export_the_same_weights(llama64, tmp_path):
    config = SFTStageConfig(max_steps=4, per_device_batch_size=2, learning_rate=1e-3, full_weights=True)
    digests, summaries = [], []
    for run in ("a", "b"):
        export, summary = train_lora_sft(config, llama64, _rows(600), tmp_path / run, full_weights=True)
        digests.append(path_sha256(export))
        summaries.append(summary)
    assert summaries[0]["determinism"] == "strict", summaries[0]["determinism"]
    assert summaries[0]["first_loss"] == summaries[1]["first_loss"]
    assert digests[0] == digests[1], f"device {'cuda' if torch.cuda.is_available() else 'cpu'}: {summaries}"


def test_the_summary_says_when_determinism_is_off(llama64, tmp_path):
    config = SFTStageConfig(max_steps=1, per_device_batch_size=2, learning_rate=1e-3, deterministic=False)
    _, summary = train_lora_sft(config, llama64, _rows(600), tmp_path)
    assert summary["determinism"] == "off"


def test_training_runs_deterministic_and_restores_the_setting():
    seen = []
    before = torch.are_deterministic_algorithms_enabled()
    result, mode = train_deterministically(lambda: seen.append(torch.are_deterministic_algorithms_enabled()) or 7,
                                           wanted=True)
    assert (result, mode, seen) == (7, "strict", [True])
    assert torch.are_deterministic_algorithms_enabled() == before


def test_an_op_without_a_deterministic_kernel_starts_the_training_over_with_the_default_algorithms():
    calls = []

    def train() -> float:
        calls.append(torch.are_deterministic_algorithms_enabled())
        weights = torch.zeros(3)
        # put_ without accumulation has no deterministic implementation (PyTorch raises in strict mode)
        weights.put_(torch.tensor([1]), torch.tensor([2.0]), accumulate=False)
        return float(weights.sum())

    before = torch.are_deterministic_algorithms_enabled()
    result, mode = train_deterministically(train, wanted=True)
    assert result == 2.0 and calls == [True, False]
    assert mode.startswith("default: ") and "put_" in mode
    assert torch.are_deterministic_algorithms_enabled() == before


def test_another_error_is_not_swallowed_and_the_setting_is_restored():
    def train() -> None:
        raise RuntimeError("CUDA out of memory")

    before = torch.are_deterministic_algorithms_enabled()
    with pytest.raises(RuntimeError, match="out of memory"):
        train_deterministically(train, wanted=True)
    assert torch.are_deterministic_algorithms_enabled() == before

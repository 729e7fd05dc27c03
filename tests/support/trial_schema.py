"""What a polars reader sees in eval_trials.parquet: the dtypes the runner's polars writer produced
before the file was written with pyarrow (the GPU machine has no polars). Shared by the tests of the
writer (tests/evaluation) and of the runner (tests/evaluation)."""

from __future__ import annotations

import polars as pl

__all__ = ["POLARS_TRIAL_SCHEMA"]

POLARS_TRIAL_SCHEMA = {
    "protocol_id": pl.Utf8, "fingerprint": pl.Utf8, "method": pl.Utf8, "experiment_id": pl.Utf8,
    "export_id": pl.Utf8, "policy": pl.Utf8, "task_id": pl.Utf8, "benchmark": pl.Utf8, "repeat": pl.Int32,
    "status": pl.Utf8, "outcome": pl.Utf8, "score": pl.Float64, "raw_score": pl.Float64, "error": pl.Utf8,
    "reads": pl.List(pl.Utf8), "read_names": pl.List(pl.Utf8), "first_read_category": pl.Utf8,
    "skill_reasoning": pl.Boolean, "turns": pl.Int32, "response_tokens": pl.Int32, "loss_tokens": pl.Int32,
    "seconds": pl.Float64, "seed": pl.Int64, "consulted_names": pl.List(pl.Utf8),
    "name_tokens": pl.Int32, "read_call_tokens": pl.Int32, "reasoning_tokens": pl.Int32,
}
"""The runner's former polars schema (trials.TRIAL_SCHEMA before the pyarrow writer), with consulted_names and the
premise's token counts (nullable Int32) since."""

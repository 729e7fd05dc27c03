"""The held-in probe (GRPOConfig.probe_every): a low-noise learning curve of the selection.

Rank 0 scores the replica on a fixed held-in sample of the training prompts before the first step and
every probe_every steps (agent.selection_scores.probe_training_rows: renamed as shown, the teacher's
evidence); no sampling, so the curve moves only when the policy does. The `probe/` metrics join the
step's metrics row.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

__all__ = ["heldin_sample", "probe_replica"]


def heldin_sample(rl_data: str | Path, seed: int, tasks: int) -> list[dict[str, Any]]:
    """The fixed held-in sample the curve probes: `tasks` rows of the rl-data table (its folder or the
    file), a seeded draw, the same at every step and on every resume."""
    # imported here, as grpo did: the trainer imports this module whether or not it probes
    from skillgate_core.base.parquet_rows import read_rows
    from skillgate_core.rl.data_prep import OUTPUT_FILE

    table = Path(rl_data)
    rows = [r for r in read_rows(table / OUTPUT_FILE if table.is_dir() else table) if r.get("prompt_ids") is not None]
    rows.sort(key=lambda r: r["task_id"])
    return random.Random(f"grpo-probe::{seed}").sample(rows, min(tasks, len(rows)))


def probe_replica(replica: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Probe the replica on the held-in `rows`: the `probe/` metrics (its train/eval mode kept)."""
    from skillgate_core.agent.selection_scores import probe_training_rows

    was_training = replica.training
    replica.eval()
    probed = probe_training_rows(replica, tokenizer, rows, "reasoning")
    replica.train(was_training)
    metrics = {"probe/heldin_tasks": len(probed),
               "probe/heldin_oracle_given_cluster": sum(r["oracle_given_cluster"] for r in probed) / len(probed),
               "probe/heldin_cluster_rank1_rate": sum(bool(r["cluster_rank1"]) for r in probed) / len(probed),
               "probe/heldin_oracle_rank1_rate": sum(r["oracle_rank"] == 1 for r in probed) / len(probed)}
    return metrics

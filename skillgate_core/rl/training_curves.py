"""Training curves of a GRPO run as one PNG: what a researcher looks at first.

Four panels over the optimizer step: reward and success rate; oracle / misleading / clean-oracle read
rates; KL and clip fraction; step time split into generate / env / train / sync. Drawn with the Agg
backend and no timestamps in the file, so the same rows give the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_training_curves"]

_PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Outcome", "rate / mean score", (("reward", "reward (mean raw score)"), ("success_rate", "success rate"))),
    ("Selection", "share of slate episodes",
     (("oracle_read_rate", "oracle read"), ("misleading_read_rate", "misleading read"),
      ("clean_oracle_rate", "clean oracle"))),
    ("Optimisation", "value", (("kl", "KL (sum / N)"), ("clip_fraction", "clip fraction"))),
    ("Step time", "seconds",
     (("time_generate_s", "generate"), ("time_env_s", "env (sandboxes)"), ("time_train_s", "train"),
      ("time_sync_s", "weight sync"))),
)


def plot_training_curves(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str = "") -> Path:
    """Write the four-panel PNG of `rows` (metrics.jsonl rows, one per step) to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    steps = [int(r["step"]) + 1 for r in rows]
    for ax, (name, ylabel, series) in zip(axes.flat, _PANELS, strict=True):
        for key, label in series:
            points = [(s, r.get(key)) for s, r in zip(steps, rows, strict=True) if r.get(key) is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ax.set_title(name)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path

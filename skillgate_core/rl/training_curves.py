"""Training curves of a GRPO run as one PNG: what a researcher looks at first.

Four panels over the optimizer step: reward and success rate; oracle / misleading / clean-oracle read
rates; KL and clip fraction; step time split into generate / env / train / sync. Drawn with the Agg
backend and no timestamps in the file, so the same rows give the same bytes.

Each curve has its own colour, line style and marker (_STYLES): with the colour cycle alone, curves
that often coincide (oracle read and clean oracle; generate and train) hid each other, and the
artifact's reduced copy (a 64-colour palette, tasks/artifact_images.py) blurred the cycle's shades.
The colours are the Okabe-Ito set (told apart with the common colour-vision deficiencies too).

    fig = training_curves_figure(rows, title="grpo-x")     # the matplotlib Figure
    plot_training_curves(rows, path, title="grpo-x")       # the PNG
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_training_curves", "training_curves_figure"]

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


_BLUE, _ORANGE, _BLACK, _VERMILLION, _PURPLE = "#0072B2", "#E69F00", "#000000", "#D55E00", "#CC79A7"

_STYLES: dict[str, tuple[str, str, str]] = {
    # key: (colour, line style, marker); the first curve of a panel solid, the others each its own dash.
    # Checked in the artifact's reduced copy: its palette turned the set's bluish green into the blue,
    # and vermillion next to orange into one orange; neither shares a panel with its look-alike here.
    "reward": (_BLUE, "-", "o"), "success_rate": (_VERMILLION, "--", "s"),
    "oracle_read_rate": (_BLUE, "-", "o"), "misleading_read_rate": (_BLACK, "-.", "^"),
    "clean_oracle_rate": (_ORANGE, "--", "s"),
    "kl": (_BLUE, "-", "o"), "clip_fraction": (_VERMILLION, "--", "s"),
    "time_generate_s": (_BLUE, "-", "o"), "time_env_s": (_BLACK, "-.", "^"), "time_train_s": (_ORANGE, "--", "s"),
    "time_sync_s": (_PURPLE, ":", "D"),
}


def training_curves_figure(rows: Sequence[Mapping[str, Any]], *, title: str = "") -> Any:
    """The four-panel matplotlib Figure of `rows` (metrics.jsonl rows, one per step); close it after use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    steps = [int(r["step"]) + 1 for r in rows]
    for ax, (name, ylabel, series) in zip(axes.flat, _PANELS, strict=True):
        for key, label in series:
            points = [(s, r.get(key)) for s, r in zip(steps, rows, strict=True) if r.get(key) is not None]
            if points:
                colour, linestyle, marker = _STYLES[key]
                ax.plot([p[0] for p in points], [p[1] for p in points], color=colour, linestyle=linestyle,
                        marker=marker, markersize=5, linewidth=1.6, label=label)
        ax.set_title(name)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def plot_training_curves(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str = "") -> Path:
    """Write the four-panel PNG of `rows` (metrics.jsonl rows, one per step) to `path`."""
    import matplotlib.pyplot as plt

    fig = training_curves_figure(rows, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path

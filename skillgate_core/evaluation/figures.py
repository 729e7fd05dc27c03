"""The paper's figures as PNGs (matplotlib Agg), from the same data as the tables.

Every figure labels its axes with units and is saved without a timestamp or a software tag, so the
same data gives the same bytes. Each PNG carries its own description in text chunks (`Title`, and
`Axes`: a JSON list of {title, xlabel, ylabel} per panel, read back from the file by the tests and by
anyone who wants to check a figure without looking at it):

    PIL.Image.open("selector_tradeoff.png").text["Axes"]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillgate_core.evaluation.arm_label import parse_arm_label
from skillgate_core.evaluation.bootstrap import PairedBootstrap

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "bootstrap_figure",
    "credit_starvation_figure",
    "main_results_figure",
    "method_bootstrap_figure",
    "read_strata_figure",
    "selector_tradeoff_figure",
    "training_selection_figure",
]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "skillgate"  # irrelevant for PNG; keeps any SVG export stable too
    return plt


def _overflow(fig: Figure) -> tuple[list[str], float, float]:
    """The axes (by title, else an axis label) whose drawn labels reach past the figure's edges, cut off in the
    PNG, and by what factor the drawn content is wider and taller than the figure (1.0: it fits that way). Of
    the layout the last draw (a savefig) made."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    edge = fig.bbox
    names = []
    for ax in fig.axes:
        box = ax.get_tightbbox(renderer)  # what is drawn: ticks beyond the view limits are not
        if box is not None and (box.x0 < edge.x0 - 1 or box.x1 > edge.x1 + 1 or box.y0 < edge.y0 - 1
                                or box.y1 > edge.y1 + 1):
            names.append(ax.get_title() or ax.get_xlabel() or ax.get_ylabel())
    drawn = fig.get_tightbbox(renderer)  # in inches
    width, height = fig.get_size_inches()
    return names, max(1.0, drawn.width / width), max(1.0, drawn.height / height)


def _grown(inches: float, overflow: float) -> float:
    """A figure side that `overflow` times the content did not fit: that much larger, with a 10% and 0.5-inch
    margin (a constrained layout hands part of new room to the axes, not to the labels)."""
    return inches * overflow * 1.1 + 0.5 if overflow > 1.0 else inches


def _save(fig: Figure, path: Path, title: str, dpi: int) -> dict[str, Any]:
    """Write `fig` with its title and axis labels as PNG text chunks; return the same as a dict, with the axes
    whose labels are still cut off (`clipped`; none when the figure fits). Long method labels (an arm, its
    variant and its seeds) squeezed the axes until an axis label ran past the edge (learning_smollm2_f52dc71's
    pooled bootstrap), so a figure grows, by what overflows and a margin, until what it draws fits."""
    axes = [{"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel()} for ax in fig.axes]
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(4):  # the check reads the layout savefig made: a figure that fits is drawn once
        fig.savefig(path, dpi=dpi, metadata={"Software": None, "Title": title,
                                             "Axes": json.dumps(axes, sort_keys=True)})
        clipped, wide, tall = _overflow(fig)
        if not clipped or wide == tall == 1.0:  # fits, or cut off by something growing cannot mend
            break
        width, height = fig.get_size_inches()
        fig.set_size_inches(_grown(width, wide), _grown(height, tall))
    _pyplot().close(fig)
    return {"title": title, "axes": axes, "clipped": clipped}


def main_results_figure(data: Sequence[Mapping[str, Any]], k: int, path: Path, dpi: int) -> dict[str, Any]:
    """Grouped bars: trial success and pass@k (%) per benchmark, one bar per method."""
    plt = _pyplot()
    scopes = sorted({b for d in data for b in d["by_benchmark"]} - {"all"}) + ["all"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    width = 0.8 / max(1, len(data))
    x = np.arange(len(scopes))
    for ax, key, label in ((axes[0], "trial_success", "trial success (% of trials)"),
                           (axes[1], f"pass@{k}", f"pass@{k} (% of tasks)")):
        for i, d in enumerate(data):
            values = [100 * v if (v := d["by_benchmark"].get(s, {}).get(key)) is not None else float("nan")
                      for s in scopes]  # nan: no bar (pass@k undefined with fewer than k trials)
            ax.bar(x + (i - (len(data) - 1) / 2) * width, values, width, label=d["method"])
        ax.set_xticks(x, scopes, rotation=15, ha="right")
        ax.set_ylim(0, 100)
        ax.set_xlabel("benchmark (family)")
        ax.set_ylabel(label)
        ax.set_title(label.split(" (")[0])
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    return _save(fig, path, "Main results: trial success and pass@k by benchmark", dpi)


def selector_tradeoff_figure(data: Sequence[Mapping[str, Any]], path: Path, dpi: int) -> dict[str, Any]:
    """Scatter: oracle first-read rate (x) against trial success (y), one labelled point per method."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 5), constrained_layout=True)
    for d in data:
        x, y = 100 * d["oracle_first_read_rate"], 100 * d["trial_success"]
        ax.scatter([x], [y], s=40)
        ax.annotate(d["method"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    ax.set_xlim(-2, 102)
    ax.set_ylim(-2, 102)
    ax.set_xlabel("oracle read first (% of trials)")
    ax.set_ylabel("trial success (% of trials)")
    ax.set_title("Selector trade-off")
    ax.grid(alpha=0.3)
    return _save(fig, path, "Selector trade-off: oracle first-read rate vs trial success", dpi)


def read_strata_figure(strata: Mapping[str, Any], path: Path, dpi: int) -> dict[str, Any]:
    """Horizontal grouped bars: trial success within each read sequence, one bar per method."""
    plt = _pyplot()
    keys, methods, cells = strata["strata"], strata["methods"], strata["cells"]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(4, len(keys)) + 1.5), constrained_layout=True)
    height = 0.8 / max(1, len(methods))
    y = np.arange(len(keys))
    for i, m in enumerate(methods):
        values = [100 * cells[s][m]["resolved"] / cells[s][m]["trials"] if cells[s][m]["trials"] else 0.0
                  for s in keys]
        ys = y + (i - (len(methods) - 1) / 2) * height
        ax.barh(ys, values, height, label=m)
        for yy, v, s in zip(ys, values, keys, strict=True):  # resolved/trials: an empty bar is not a 0% bar
            c = cells[s][m]
            ax.text(min(v, 88) + 1, yy, f"{c['resolved']}/{c['trials']}" if c["trials"] else "no trials",
                    va="center", fontsize=5.5)
    ax.set_yticks(y, keys)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("trial success within the stratum (% of its trials)")
    ax.set_ylabel("read sequence (O/M/R/I/U = oracle/misleading/relevant/irrelevant/unadvertised)")
    ax.set_title("Success within the same read sequence")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path, "Trial success conditioned on the read sequence", dpi)


def bootstrap_figure(result: PairedBootstrap, path: Path, dpi: int) -> dict[str, Any]:
    """Histograms of the resampled differences, with the observed difference and the percentile interval:
    one panel per statistic, two panels a row."""
    plt = _pyplot()
    columns = min(2, len(result.intervals))
    rows = -(-len(result.intervals) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4 * rows), constrained_layout=True,
                             squeeze=False)
    for ax, interval in zip(axes.flat, result.intervals, strict=False):
        values = 100 * result.distributions[interval.statistic]
        ax.hist(values, bins=40, color="0.65")
        ax.axvline(100 * interval.difference, color="C3", label="observed")
        for j, edge in enumerate((interval.ci_low, interval.ci_high)):
            ax.axvline(100 * edge, color="C0", linestyle="--",
                       label=f"{100 * result.confidence:g}% interval" if j == 0 else None)
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_xlabel(f"{interval.statistic} difference, method - baseline (percentage points)")
        ax.set_ylabel(f"bootstrap resamples (count of {result.resamples})")
        ax.set_title(f"{interval.statistic}: {100 * interval.difference:+.1f} pp "
                     f"[{100 * interval.ci_low:+.1f}, {100 * interval.ci_high:+.1f}]")
        ax.legend(fontsize=7, loc="upper left")
    for ax in axes.flat[len(result.intervals):]:
        fig.delaxes(ax)  # an odd number of statistics: no empty panel (and no unlabelled axes in the PNG)
    fig.suptitle(f"{result.method} - {result.baseline} ({result.tasks} tasks, paired by task)", fontsize=9)
    return _save(fig, path, f"Paired task-cluster bootstrap: {result.method} - {result.baseline}", dpi)


def _comparison_label(result: PairedBootstrap) -> str:
    """A method as the figure names it: its label, with the seeds when they are pooled."""
    return f"{result.method} (seeds {', '.join(map(str, result.arm_seeds))})" if result.pooled else result.method


def method_bootstrap_figure(results: Sequence[PairedBootstrap], path: Path, dpi: int,
                            heading: str | None = None) -> dict[str, Any]:
    """One panel per statistic, stacked: each method's difference to the baseline with its percentile interval.
    `heading`: what is compared (default: every method - the baseline, "at the method's seed" when the results
    pair seeds with several baseline labels)."""
    plt = _pyplot()
    statistics = [i.statistic for i in results[0].intervals]
    panel_height = 1.0 + 0.35 * len(results)
    fig, axes = plt.subplots(len(statistics), 1, figsize=(7.5, panel_height * len(statistics)),
                             constrained_layout=True, squeeze=False)
    y = np.arange(len(results))
    for ax, statistic in zip(axes[:, 0], statistics, strict=True):
        intervals = [r.interval(statistic) for r in results]
        diffs = np.array([100 * i.difference for i in intervals])
        below = diffs - np.array([100 * i.ci_low for i in intervals])
        above = np.array([100 * i.ci_high for i in intervals]) - diffs
        ax.errorbar(diffs, y, xerr=[below, above], fmt="o", color="C0", capsize=3)
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_yticks(y, [_comparison_label(r) for r in results], fontsize=7)
        ax.set_ylim(len(results) - 0.5, -0.5)  # the first method on top, as in the table
        ax.set_xlabel(f"{statistic} difference, method - baseline (percentage points)")
        ax.set_ylabel("method (its rows' label)")
        ax.set_title(statistic)
        ax.grid(axis="x", alpha=0.3)
    first = results[0]
    baselines = sorted({r.baseline for r in results})
    heading = heading or ("every method - " + (baselines[0] if len(baselines) == 1 else
                                               f"{parse_arm_label(baselines[0]).arm} at the method's seed"))
    fig.suptitle(f"{heading} ({first.tasks} tasks, paired by task, {100 * first.confidence:g}% intervals)",
                 fontsize=9)
    return _save(fig, path, f"Paired task-cluster bootstrap: {heading}", dpi)


def credit_starvation_figure(bins: Sequence[Mapping[str, Any]], path: Path, dpi: int) -> dict[str, Any]:
    """Per response-length bin: read-call and identity-token shares of loss tokens, and the oracle-read
    negative-advantage rate, one line per profile."""
    plt = _pyplot()
    labels = [b["bin"] for b in sorted({(b["bin_low"], b["bin"]): b for b in bins}.values(), key=lambda b: b["bin_low"])]
    position = {label: i for i, label in enumerate(labels)}
    profiles = sorted({b["profile"] for b in bins})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for j, profile in enumerate(profiles):
        mine = [b for b in bins if b["profile"] == profile]
        xs = [position[b["bin"]] for b in mine]
        for key, style, name in (("read_call_token_share", "-", "read call"), ("identity_token_share", ":", "identity")):
            pts = [(x, 100 * b[key]) for x, b in zip(xs, mine, strict=True) if b[key] is not None]
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=f"C{j}",
                         label=f"{profile}: {name}")
        pts = [(x, 100 * b["oracle_negative_advantage_rate"]) for x, b in zip(xs, mine, strict=True)
               if b["oracle_negative_advantage_rate"] is not None]
        axes[1].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=f"C{j}", label=profile)
    for ax in axes:
        ax.set_xticks(range(len(labels)), labels, rotation=15, ha="right")
        ax.set_xlabel("response length bin (generated tokens)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper right")
    axes[0].set_ylabel("share of loss tokens (%)")
    axes[0].set_title("Read calls and credited skill names among loss tokens")
    axes[1].set_ylabel("oracle reads with a negative advantage (%)")
    axes[1].set_ylim(0, 100)
    axes[1].set_title("Oracle reads pushed down")
    return _save(fig, path, "Credit starvation by response length", dpi)


def training_selection_figure(runs: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]], path: Path,
                              dpi: int) -> dict[str, Any]:
    """Over the optimizer step: oracle read rate and clean-oracle rate, and the identity-token share."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for j, (profile, source, rows) in enumerate(runs):
        rows = sorted(rows, key=lambda r: int(r["step"]))
        label = profile if sum(p == profile for p, _, _ in runs) == 1 else f"{profile} ({source})"
        for key, style in (("oracle_read_rate", "-"), ("clean_oracle_rate", ":")):
            pts = [(int(r["step"]) + 1, 100 * float(r[key])) for r in rows if r.get(key) is not None]
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], style, color=f"C{j}",
                         label=f"{label}: {key.removesuffix('_rate').replace('_', ' ')}")
        pts = [(int(r["step"]) + 1, 100 * float(r["selection_token_share"])) for r in rows
               if r.get("selection_token_share") is not None]
        axes[1].plot([p[0] for p in pts], [p[1] for p in pts], color=f"C{j}", label=label)
    axes[0].set_ylabel("share of slate episodes (%)")
    axes[0].set_ylim(0, 100)
    axes[0].set_title("Oracle reads during training")
    # a nonzero advantage: the selector's (scaled by lambda in the loss: 0 for masked_task_only) in the
    # two-stream profiles, the episode's in the plain ones
    axes[1].set_ylabel("skill-name tokens with a nonzero advantage (% of loss tokens)")
    axes[1].set_title("Skill-name tokens carrying credit")
    for ax in axes:
        ax.set_xlabel("optimizer step (count)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper left")
    return _save(fig, path, "GRPO training: selection over steps", dpi)

"""The curves of the grpo training report stay apart: the pairs a reader compares (and that often
coincide) differ in colour and line style, so neither hides the other."""

from __future__ import annotations

import matplotlib.colors as mcolors
import pytest

from skillgate_core.rl.training_curves import plot_training_curves, training_curves_figure

PAIRS = [("oracle read", "clean oracle"), ("generate", "train"), ("env (sandboxes)", "weight sync")]


def _rows(n: int = 4) -> list[dict]:
    # oracle read == clean oracle and generate == train on every step: what a run without misleading
    # reads and a balanced step shows, and where one curve used to sit right on the other
    return [{"step": i, "reward": 0.1 * i, "success_rate": 0.1 * i, "oracle_read_rate": 0.5, "misleading_read_rate": 0.0,
             "clean_oracle_rate": 0.5, "kl": 0.01, "clip_fraction": 0.0, "time_generate_s": 2.0, "time_env_s": 1.0,
             "time_train_s": 2.0, "time_sync_s": 1.0} for i in range(n)]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=["oracle-vs-clean", "generate-vs-train", "env-vs-sync"])
def test_compared_curves_differ_in_colour_and_line_style(a, b):
    import matplotlib.pyplot as plt

    fig = training_curves_figure(_rows())
    try:
        lines = {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}
        first, second = lines[a], lines[b]
        assert mcolors.to_hex(first.get_color()) != mcolors.to_hex(second.get_color())
        assert first.get_linestyle() != second.get_linestyle()
        assert first.get_marker() != second.get_marker()
    finally:
        plt.close(fig)


def test_every_curve_of_a_panel_has_its_own_style(tmp_path):
    import matplotlib.pyplot as plt

    fig = training_curves_figure(_rows())
    try:
        for ax in fig.axes:
            styles = [(mcolors.to_hex(line.get_color()), line.get_linestyle()) for line in ax.get_lines()]
            assert len({c for c, _ in styles}) == len(styles) and len({s for _, s in styles}) == len(styles), styles
    finally:
        plt.close(fig)
    assert plot_training_curves(_rows(), tmp_path / "curves.png").stat().st_size > 0

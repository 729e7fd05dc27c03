"""deployments.cli.progress: live bars on a terminal, one line per phase elsewhere (stderr only)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from deployments.cli.progress import phase_progress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=100, color_system=None), buffer


def test_off_a_terminal_each_phase_prints_one_line_when_done():
    console, buffer = _console(terminal=False)
    with phase_progress(("writing", "tasks"), ("gate", "tasks"), console=console) as (writing, gate):
        for n in range(1, 4):
            writing(n, 3)
        assert buffer.getvalue().splitlines()[0].startswith("writing: 3/3 tasks in ")  # at once, not at the end
        gate(0, 2)
        gate(1, 2)
        gate(2, 2)
    assert [re.sub(r"\d+\.\d s", "T s", x) for x in buffer.getvalue().splitlines()] == [
        "writing: 3/3 tasks in T s", "gate: 2/2 tasks in T s"]


def test_an_interrupted_phase_says_how_far_it_got_and_an_unstarted_one_says_nothing():
    console, buffer = _console(terminal=False)
    with pytest.raises(KeyboardInterrupt), phase_progress(("gate", "tasks"), ("other", "x"), console=console) as (
            gate, _):
        gate(0, 70)
        gate(5, 70)
        raise KeyboardInterrupt
    assert re.fullmatch(r"gate: 5/70 tasks in \d+\.\d s \(stopped\)\n", buffer.getvalue())


def test_on_a_terminal_the_bars_show_the_counts():
    console, buffer = _console(terminal=True)
    with phase_progress(("validity gate", "tasks"), console=console) as (gate,):
        gate(0, 3)
        gate(3, 3)
    out = buffer.getvalue()
    assert "validity gate" in out and "3/3 tasks" in out and " in " not in out.splitlines()[-1]

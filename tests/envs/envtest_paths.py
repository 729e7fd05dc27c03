"""Paths the environment tests share (imported by name: tests/envs is on sys.path under pytest)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TASKS = Path(__file__).resolve().parent / "tasks"
GOOD = TASKS / "good"
"""Hand-written tasks that pass the validity gate."""
BROKEN = TASKS / "broken"
"""Hand-written tasks that must fail it (verifier passes the initial state, wrong solution, flaky)."""

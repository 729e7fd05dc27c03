"""Tests of the benchmark scripts (benchmarks/*.py, benchmarks/gpu/*): each runs a script in its CPU smoke mode
or reads the committed results it summarises. The GPU smoke runs start Ray like the RL tests do."""

from __future__ import annotations

import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local test cluster, no token files in ~ (as tests/rl)

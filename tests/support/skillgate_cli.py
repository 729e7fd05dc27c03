"""Run the `skillgate` command line as a real subprocess of THIS checkout's code.

`main()` is what the console script calls; running it through `python -c` from the repository root
makes the checkout's packages win over whatever the installed script points at, so a worktree's
tests exercise the worktree. Exit code, stdout and stderr are exactly what a user sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

__all__ = ["REPO", "run_skillgate"]


def run_skillgate(*args: str, home: Path, env: Mapping[str, str] | None = None,
                  timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "SKILLGATE_HOME": str(home), "COLUMNS": "200", "PYTHONPATH": str(REPO),
                **(env or {})}
    return subprocess.run([sys.executable, "-c", "from deployments.cli import main; main()", *args],
                          cwd=REPO, capture_output=True, text=True, env=full_env, timeout=timeout)

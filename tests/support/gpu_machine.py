"""Run code the way the GPU machine would: polars, duckdb, prefect and rank_bm25 absent.

The GPU machine has pyarrow but none of these (docs/gpu.md, What travels), so the training and evaluation
path must neither import them nor call into them. A subprocess installs an import blocker first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ABSENT = ("polars", "duckdb", "prefect", "rank_bm25")

BLOCKER = (
    "import sys\n"
    f"for _m in [m for m in sys.modules if m.split('.')[0] in {ABSENT!r}]:\n"
    "    del sys.modules[_m]\n"
    f"for _m in {ABSENT!r}:\n"
    "    sys.modules[_m] = None  # absent: import fails, importlib.util.find_spec returns None\n"
)
"""Python source that makes importing any of ABSENT fail (prepend it to the code a subprocess runs)."""


def run_without_absent(code: str, *, timeout: float = 600, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter (this one's executable) with ABSENT blocked; cwd = the checkout,
    so its skillgate_core is the one imported."""
    return subprocess.run([sys.executable, "-c", BLOCKER + code], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)

"""benchmarks/sandbox_overhead.py runs and writes its report (tiny settings; the full run is slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sandbox_overhead.py"), *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def test_benchmark_smoke(tmp_path: Path, bwrap_ready):
    report = _run(tmp_path, "--backends", "bwrap", "--commands", "10", "--concurrent", "3", "--episode-commands", "4")
    assert set(report) >= {"command", "git", "machine", "versions", "backends"}
    assert report["git"]["commit"] and isinstance(report["git"]["dirty"], bool)
    bwrap = report["backends"]["bwrap"]
    assert bwrap["exec_true"]["n"] == 10 and bwrap["overhead"]["median_ms"] > 0
    assert bwrap["concurrent"] == {**bwrap["concurrent"], "sandboxes": 3, "failures": 0}


@pytest.mark.slow
def test_benchmark_full_sixteen_concurrent(tmp_path: Path, bwrap_ready, docker_ready):
    report = _run(tmp_path)
    for backend in ("bwrap", "docker"):
        entry = report["backends"][backend]
        assert entry["concurrent"]["sandboxes"] == 16 and entry["concurrent"]["failures"] == 0, entry["concurrent"]
        # Targets hold on a quiet machine; a shared, loaded one gets twice the room here.
        assert entry["overhead"]["median_ms"] <= 2 * entry["target_median_ms"], entry["overhead"]

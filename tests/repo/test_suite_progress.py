"""`make test` says how many tests there are and, as it goes, how many ran and when it will end: a real
pytest session (a subprocess) over a folder of quick tests, with the suite's progress hooks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_a_quiet_session_prints_the_count_then_progress_with_an_eta(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from support.suite_progress import (pytest_collection_finish, pytest_runtest_logfinish,\n"
        "                                    pytest_runtest_protocol, pytest_sessionfinish)\n")
    (tmp_path / "test_many.py").write_text(
        "import pytest, time\n\n@pytest.mark.parametrize('i', range(20))\ndef test_one(i):\n    time.sleep(0.01)\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"})
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "[suite] 20 tests to run" in out, out
    progress = re.findall(r"\[suite\] (\d+)/20 tests in \d+ s; ETA \d+ s at this pace", out)
    assert [int(n) for n in progress] == list(range(2, 20, 2)), out
    assert "[suite] 20/20 tests in " in out and "20 passed" in out, out

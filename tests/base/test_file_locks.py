"""file_lock between processes: try-once refusal, and no lock left behind by a killed holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from skillgate_core.base.file_locks import LockTimeout, file_lock

HOLD = "import sys, time; from pathlib import Path; from skillgate_core.base.file_locks import file_lock\n" \
       "with file_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n"


def test_a_held_lock_refuses_a_try_and_a_killed_holder_leaves_none(tmp_path: Path):
    path = tmp_path / "locks" / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout, match="locked by another process"):
            with file_lock(path, timeout_s=0):
                pass
        with pytest.raises(LockTimeout):
            with file_lock(path, timeout_s=0.05):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with file_lock(path, timeout_s=0):  # the kernel released it with the process
        pass

"""Entries of the event log that are not regular files (a folder, a FIFO, a link named like an
event) are reported by name and skipped: they never block a reader or a writer, and a link is never
followed (it could name any file of the host, or a FIFO)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.skillgate_cli import REPO, run_skillgate
from wh_scenario import run_started

from skillgate_core.base.paths import StateLayout
from warehouse import query, record
from warehouse.events import EventFormatError
from warehouse.spool import EventLog, append_events, event_log, list_pending, read_event_file

_CLI_TIMEOUT_S = 90  # a FIFO opened for reading blocks forever: a hang is a timeout, i.e. a failure


def _plant(folder: Path, outside: Path, first_seq: int) -> list[Path]:
    """A FIFO, a folder, a link to a FIFO and a link to a valid event file, each named like an event."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [folder / f"{first_seq + i:020d}.json" for i in range(4)]
    os.mkfifo(names[0])
    names[1].mkdir()
    (names[1] / "x").write_text("{}")
    fifo_outside = outside / "fifo"
    if not fifo_outside.exists():
        os.mkfifo(fifo_outside)
    names[2].symlink_to(fifo_outside)
    # a real event file elsewhere: following the link would record a run nobody recorded here
    other = append_events(EventLog(outside / "other-log"), [run_started("run-linked", "collect")])
    names[3].symlink_to(other)
    return names


def _python(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SKILLGATE_HOME": str(home), "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests' / 'warehouse'}"}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env,
                          timeout=_CLI_TIMEOUT_S)


def test_foreign_entries_in_spool_archive_and_rejected_are_reported_and_skipped(state: StateLayout, tmp_path: Path):
    record(run_started("run-1", "collect"), state=state)
    assert query("select run_id from run", state=state).rows == [("run-1",)]
    log_ = event_log(state)
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = (_plant(log_.spool, outside, 1) + _plant(log_.archive, outside, 11) + _plant(log_.rejected, outside, 21))

    # a writer in another process records and ingests: it must neither hang nor stop at the FIFO
    proc = _python("from warehouse import record, ingest; from wh_scenario import run_started;"
                   "record(run_started('run-2', 'collect')); r = ingest(lock_wait_s=30, db_wait_s=30);"
                   "print('ingested', r.ingested, 'pending', r.pending)", state.home)
    assert proc.returncode == 0, proc.stderr
    assert "pending 0" in proc.stdout, proc.stdout

    err = proc.stderr
    for args, ok in ((["warehouse", "status"], {0}), (["sql", "select run_id from run order by run_id"], {0}),
                     (["warehouse", "verify"], {0, 1}), (["warehouse", "rebuild"], {0}),
                     (["sql", "select run_id from run order by run_id"], {0})):
        out = run_skillgate(*args, home=state.home, timeout=_CLI_TIMEOUT_S)
        assert out.returncode in ok, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr, (args, out.stderr)
        err += out.stderr
        if args[0] == "sql":
            assert "run-1" in out.stdout and "run-2" in out.stdout and "run-linked" not in out.stdout, out.stdout
    # every planted entry was named in a warning, and left where it was (nothing followed or moved)
    for p in planted:
        assert str(p) in err, (p, err)
        assert os.path.lexists(p), p
    assert query("select count(*) from run where run_id = 'run-linked'", state=state).rows == [(0,)]


@pytest.mark.timeout(30)  # a blocked open of the FIFO is a failure, not a hang
@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
def test_read_event_file_refuses_what_is_not_a_regular_file_without_blocking(tmp_path: Path, kind: str):
    real = append_events(EventLog(tmp_path / "log"), [run_started("run-1", "collect")])
    path = tmp_path / f"{1:020d}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(real)
    with pytest.raises(EventFormatError, match=str(path)):
        read_event_file(path)
    assert list_pending(EventLog(tmp_path)) == []

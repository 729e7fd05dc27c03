"""A damaged warehouse file: one clear error naming the file and `skillgate warehouse rebuild`, no
traceback; events recorded meanwhile are kept (never refused), and the rebuild brings everything back."""

from __future__ import annotations

import os

import pytest
from support.skillgate_cli import run_skillgate
from wh_scenario import T0, Scenario

from warehouse import RunFinished, query, rebuild, record
from warehouse.read import WarehouseDamaged
from warehouse.spool import event_log, list_pending, list_rejected

DAMAGE = {
    "not-duckdb": lambda data: b"this is not a database\n" * 200,
    "truncated": lambda data: data[:5000],
    "bad-checksum": lambda data: data[:100] + os.urandom(7900) + data[8000:],
}


def _damage(sc: Scenario, how: str) -> None:
    f = sc.state.warehouse_file
    f.write_bytes(DAMAGE[how](f.read_bytes()))


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_commands_on_a_damaged_file_say_which_file_and_how_to_fix_it(scenario: Scenario, how: str):
    _damage(scenario, how)
    for args in (["warehouse", "status"], ["warehouse", "verify"], ["sql", "select count(*) from run"],
                 ["lineage", "exp-1/step-10"]):
        proc = run_skillgate(*args, home=scenario.state.home)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        err = " ".join(proc.stderr.split())
        assert str(scenario.state.warehouse_file) in err and "skillgate warehouse rebuild" in err, (args, err)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # one paragraph


def test_events_recorded_while_damaged_wait_and_the_rebuild_restores_everything(scenario: Scenario):
    before = query("select run_id, status from v_run order by run_id", state=scenario.state).rows
    _damage(scenario, "bad-checksum")
    with pytest.raises(WarehouseDamaged) as err:
        query("select 1", state=scenario.state)
    assert "skillgate warehouse rebuild" in str(err.value)
    # A writer is never stopped by the damage, and its events are neither lost nor refused.
    record(RunFinished(run_id="nope", status="completed", finished_at=T0), state=scenario.state)
    log_ = event_log(scenario.state)
    assert len(list_pending(log_)) == 1 and list_rejected(log_) == []

    report = rebuild(scenario.state)
    assert report.failed == [] and report.after is not None and report.after.pending == 0
    assert query("select run_id, status from v_run order by run_id", state=scenario.state).rows == before
    kept = [p for p in scenario.state.home.iterdir() if p.name.startswith("warehouse.duckdb.damaged-")]
    assert len(kept) == 1, "the damaged file is set aside, not overwritten"
    # the event for an unknown run reached the warehouse writer and was refused there, with a reason
    assert len(list_rejected(log_)) == 1

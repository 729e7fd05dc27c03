"""A look at the warehouse without changing it: file, schema version, row counts, event log.

    s = warehouse_status(state_layout())
    s.schema_version, s.latest_version, s.pending, s.rejected
    s.runs, s.dead_runs       # {"completed": 3, "interrupted": 1}, running runs whose process is gone

Used by `skillgate doctor` and `skillgate warehouse status`. It neither ingests nor creates the
file; if an ingest holds the file it retries briefly, then reports the file as busy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from skillgate_core.base.paths import StateLayout, state_layout
from warehouse.damage import damage_named
from warehouse.interrupted import find_dead_runs
from warehouse.migrate import LATEST_VERSION, current_version
from warehouse.read import WarehouseBusy, open_read_only, row_count
from warehouse.spool import event_log, list_archived, list_pending, list_rejected

__all__ = ["COUNTED_TABLES", "WarehouseStatus", "warehouse_status"]

COUNTED_TABLES = ("experiment", "run", "segment", "checkpoint", "training_metric", "dataset_version", "model_export",
                  "evaluation", "eval_trial", "eval_metric")


@dataclass(frozen=True)
class WarehouseStatus:
    """What the warehouse holds now."""

    file: Path
    """The DuckDB file."""
    exists: bool
    """False before the first event is ingested."""
    schema_version: int
    """Applied migrations (0 when absent)."""
    latest_version: int
    """Migrations this code ships."""
    pending: int
    """Event files waiting in the spool."""
    rejected: int
    """Event files refused (see rejected/*.reason.txt)."""
    archived: int
    """Event files applied (the rebuild source)."""
    busy: bool = False
    """The file was locked by a writer for the whole wait."""
    rows: dict[str, int] = field(default_factory=dict)
    """Row count per main table."""
    runs: dict[str, int] = field(default_factory=dict)
    """Runs per status (completed, failed, interrupted, running)."""
    dead_runs: int = 0
    """Runs recorded as running whose process is gone (this host): `skillgate warehouse reap`."""


def warehouse_status(state: StateLayout | None = None, timeout_s: float = 3.0) -> WarehouseStatus:
    state = state or state_layout()
    log_ = event_log(state)
    status = functools.partial(
        WarehouseStatus, file=state.warehouse_file, latest_version=LATEST_VERSION, pending=len(list_pending(log_)),
        rejected=len(list_rejected(log_)), archived=len(list_archived(log_)))
    if not state.warehouse_file.exists():
        return status(exists=False, schema_version=0)
    try:
        con = open_read_only(state, timeout_s)
    except WarehouseBusy:
        return status(exists=True, schema_version=-1, busy=True)
    try:
        with damage_named(state.warehouse_file):
            version = current_version(con)
            rows: dict[str, int] = {}
            runs: dict[str, int] = {}
            dead = 0
            if version >= 1:
                for t in COUNTED_TABLES:
                    rows[t] = row_count(con, t)
            if version >= 2:
                runs = dict(con.execute("select status, count(*) from v_run group by status order by status").fetchall())
            if version >= 3:
                dead = len(find_dead_runs(con))
    finally:
        con.close()
    return status(exists=True, schema_version=version, rows=rows, runs=runs, dead_runs=dead)

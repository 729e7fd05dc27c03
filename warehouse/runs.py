"""Recent stage runs, newest first, with what each one produced (`skillgate runs`).

    with read_connection() as con:
        recent_runs(con, stage="collect", status="completed", limit=20)
    -> [{"run_id", "stage", "status", "reused", "trigger", "started_at", "seconds", "experiment_id",
         "config_digest", "outputs": [{"role", "sha256", "uri"}, ...], "error"}, ...]

A run answered from the stage cache (reused) produced nothing itself (an output keeps its first
producer, apply.py); its outputs are those of the earlier run of the same stage, config and inputs
that did.
"""

from __future__ import annotations

from typing import Any

import duckdb

__all__ = ["RUN_STATUSES", "recent_runs", "run_outputs"]

RUN_STATUSES = ("running", "completed", "failed", "interrupted", "cancelled")
"""What a run's status can be (v_run)."""

_RUNS = """
select r.run_id, r.stage, r.status, r.reused, r."trigger", r.started_at,
       round(date_diff('millisecond', r.started_at, r.finished_at) / 1000.0, 1) as seconds,
       r.experiment_id, r.config_digest, r.error,
       coalesce((select list(i.role || '=' || i.dataset_sha256 order by i.role) from run_input i
                 where i.run_id = r.run_id), []) as input_key
from v_run r
where (? is null or r.stage = ?) and (? is null or r.status = ?)
order by r.started_at desc, r.run_id desc
limit ?
"""

_OUTPUTS = """
select kind as role, sha256, uri from dataset_version where produced_by_run = ? order by kind
"""

# the first producing run of the same stage, config and inputs: where a reused run's outputs came from
_PRODUCER = """
select r.run_id from run r
where r.stage = ? and r.config_digest = ? and r.run_id <> ?
  and coalesce((select list(i.role || '=' || i.dataset_sha256 order by i.role) from run_input i
                where i.run_id = r.run_id), []) = ?
  and exists (select 1 from dataset_version d where d.produced_by_run = r.run_id)
order by r.started_at, r.run_id
limit 1
"""


def run_outputs(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """What `run_id` produced: [{role, sha256, uri}] by role ([] for a reused run: see recent_runs)."""
    cur = con.execute(_OUTPUTS, [run_id])
    return [dict(zip(("role", "sha256", "uri"), row, strict=True)) for row in cur.fetchall()]


def recent_runs(con: duckdb.DuckDBPyConnection, *, stage: str | None = None, status: str | None = None,
                limit: int = 20) -> list[dict[str, Any]]:
    """The latest `limit` runs (all if limit <= 0), optionally of one stage and/or one status."""
    if status is not None and status not in RUN_STATUSES:
        raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    cur = con.execute(_RUNS, [stage, stage, status, status, limit if limit > 0 else None])
    cols = [d[0] for d in cur.description or ()]
    runs = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    for run in runs:
        inputs = run.pop("input_key")
        run["outputs"] = run_outputs(con, run["run_id"])
        if run["reused"] and not run["outputs"]:
            producer = con.execute(_PRODUCER, [run["stage"], run["config_digest"], run["run_id"], inputs]).fetchone()
            if producer:
                run["outputs"] = run_outputs(con, producer[0])
                run["outputs_from"] = producer[0]
    return runs

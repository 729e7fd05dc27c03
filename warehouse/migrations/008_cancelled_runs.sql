-- 008: a run cancelled from the orchestrator (the Prefect UI's Cancel, `prefect flow-run cancel`) ends
-- `cancelled`, with the words of who cancelled it: it was recorded `failed` with the empty error
-- "TerminationSignal: ", a crash that never happened (tasks/cancellation.py tells the two apart).
-- DuckDB cannot alter a CHECK constraint: run_end is rebuilt under a new name, filled from the old
-- one and renamed, as 003 did (no table references run_end; the views bind by name when queried).

create table run_end_v8 (
    run_id varchar primary key references run (run_id),
    status varchar not null check (status in ('completed', 'failed', 'interrupted', 'cancelled')),
    reused boolean not null,
    finished_at timestamptz not null,
    error varchar,
    metrics json,
    check ((status = 'completed') = (error is null))
);
insert into run_end_v8 select run_id, status, reused, finished_at, error, metrics from run_end;
drop table run_end;
alter table run_end_v8 rename to run_end;

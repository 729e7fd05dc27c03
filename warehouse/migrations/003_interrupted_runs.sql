-- 003: runs whose process died without recording an end (SIGKILL, OOM killer, power loss).
--   * segment.process_start: the start stamp of the segment's process (skillgate_core.base.processes),
--     so the run is judged by host + pid + start and a reused pid is not taken for it;
--   * run_end.status may be 'interrupted' (warehouse/interrupted.py records it once the process is
--     found gone); failed and interrupted ends carry an error text saying why.
-- DuckDB cannot alter a CHECK constraint, so run_end is rebuilt under a new name, filled from the
-- old one and renamed (no table references run_end; the views bind by name when queried).

alter table segment add column process_start varchar;

create table run_end_v3 (
    run_id varchar primary key references run (run_id),
    status varchar not null check (status in ('completed', 'failed', 'interrupted')),
    reused boolean not null,
    finished_at timestamptz not null,
    error varchar,
    metrics json,
    check ((status = 'completed') = (error is null))
);
insert into run_end_v3 select run_id, status, reused, finished_at, error, metrics from run_end;
drop table run_end;
alter table run_end_v3 rename to run_end;

-- each run with the process that executes it (its latest segment): what the interrupted-run sweep reads
create view v_run_process as
select r.run_id, r.stage, r.status, r.experiment_id, s.segment_id, s.run_name, s.host, s.pid,
       s.process_start, s.started_at as segment_started_at, s.ended_at as segment_ended_at
from v_run r
join v_segment s on s.run_id = r.run_id
qualify row_number() over (partition by r.run_id order by s.started_at desc, s.segment_id desc) = 1;

-- 005: evaluations as the runner writes them (skillgate_core/evaluation/runner.py).
--   * evaluation gains what every trial row of it shares: protocol id, method label, policy (path
--     or URL), tag (nightly-YYYY-MM-DD, ...) and the protocol's trial count;
--   * eval_trial carries the whole per-trial row (eval_trials.parquet's columns); rows recorded
--     before 004 keep nulls there. DuckDB cannot add a column with a CHECK, so eval_trial is rebuilt
--     under a new name, filled from the old one and renamed (nothing references eval_trial);
--   * evaluation_status: the resumable ends of an attempt (incomplete, failed) and the resumes
--     (running), append-only in order; evaluation_end stays the final end (completed);
--   * eval_regression: one nightly comparison of an evaluation with the previous one of the same
--     protocol fingerprint (evaluation/regression.py);
--   * v_evaluation: status = the final end, else the latest status row, else running;
--     v_eval_trial: exactly the columns of eval_trials.parquet, one row per trial.

alter table evaluation add column protocol_id varchar;
alter table evaluation add column method varchar;
alter table evaluation add column policy varchar;
alter table evaluation add column tag varchar;
alter table evaluation add column trials_total integer;

create table eval_trial_v4 (
    eval_id varchar not null references evaluation (eval_id),
    row_id varchar not null,
    trial_index integer not null check (trial_index >= 0),
    task_id varchar not null,
    benchmark varchar not null,
    "repeat" integer not null check ("repeat" >= 0),
    outcome varchar not null check (outcome in ('resolved', 'fail', 'error')),
    reward double,
    n_turns integer check (n_turns >= 0),
    n_reads integer check (n_reads >= 0),
    status varchar check (status in ('completed', 'truncated', 'aborted')),
    raw_score double,
    error varchar,
    reads varchar[],
    read_names varchar[],
    first_read_category varchar
        check (first_read_category in ('oracle', 'misleading', 'relevant', 'irrelevant', 'unadvertised')),
    skill_reasoning boolean,
    response_tokens integer check (response_tokens >= 0),
    loss_tokens integer check (loss_tokens >= 0),
    seconds double check (seconds >= 0),
    seed bigint,
    primary key (eval_id, row_id),
    check ((outcome = 'error') = (status = 'aborted') or status is null),
    check (len(reads) = len(read_names) or reads is null)
);
insert into eval_trial_v4 (eval_id, row_id, trial_index, task_id, benchmark, "repeat", outcome, reward, n_turns, n_reads)
select eval_id, row_id, trial_index, task_id, benchmark, "repeat", outcome, reward, n_turns, n_reads from eval_trial;
drop table eval_trial;
alter table eval_trial_v4 rename to eval_trial;

create table evaluation_status (
    eval_id varchar not null references evaluation (eval_id),
    seq integer not null check (seq >= 1),
    status varchar not null check (status in ('running', 'incomplete', 'failed')),
    attempt integer not null check (attempt >= 1),
    trials_done integer check (trials_done >= 0),
    detail varchar,
    changed_at timestamptz not null,
    primary key (eval_id, seq)
);

create table eval_regression (
    eval_id varchar primary key references evaluation (eval_id),
    baseline_eval_id varchar references evaluation (eval_id),
    protocol_fingerprint varchar not null references eval_protocol (fingerprint),
    metric varchar not null,
    current_value double not null,
    baseline_value double,
    delta double,
    ci_low double,
    ci_high double,
    alpha double,
    n_boot integer,
    seed bigint,
    tasks integer,
    regressed boolean not null,
    flow_run_id varchar,
    created_at timestamptz not null,
    check ((baseline_eval_id is null) = (delta is null)),
    check (not regressed or baseline_eval_id is not null)
);

create or replace view v_evaluation as
select v.*,
       coalesce(e.status, s.status, 'running') as status,
       coalesce(e.finished_at, case when s.status <> 'running' then s.changed_at end) as finished_at,
       coalesce(s.attempt, 1) as attempt,
       s.detail as status_detail
from evaluation v
left join evaluation_end e on e.eval_id = v.eval_id
left join (
    select * from evaluation_status qualify row_number() over (partition by eval_id order by seq desc) = 1
) s on s.eval_id = v.eval_id;

create view v_eval_trial as
select v.protocol_id, v.protocol_fingerprint as fingerprint, v.method, x.experiment_id, x.export_name as export_id,
       v.policy, t.task_id, t.benchmark, t."repeat", t.status, t.outcome, t.reward as score, t.raw_score,
       t.error, t.reads, t.read_names, t.first_read_category, t.skill_reasoning, t.n_turns as turns,
       t.response_tokens, t.loss_tokens, t.seconds, t.seed,
       t.eval_id, t.row_id, t.trial_index
from eval_trial t
join evaluation v on v.eval_id = t.eval_id
join model_export x on x.export_id = v.export_id;

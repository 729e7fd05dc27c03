-- 001: the lineage tables. Conventions:
--   * ids are text; ids of things owned by an experiment are qualified "EXPERIMENT_ID/NAME"
--     (segments, exports, evaluations), so two experiments may both have an export "step-200";
--   * content digests are 64 lowercase hex (sha256) and checked as such;
--   * every artifact row has a foreign key to the run that produced it, inputs are a separate
--     edge table (run x dataset x role), as in MLflow/OpenLineage/Marquez;
--   * timestamps are timestamptz (instants), written from UTC strings;
--   * append-only: no row is ever updated. How a run, segment or evaluation ended is its own row
--     (run_end, segment_end, evaluation_end, keyed by the thing, so it ends at most once), and the
--     v_run / v_segment / v_evaluation views (002) show the current status. Besides keeping
--     history, this sidesteps DuckDB's foreign-key limitation: an UPDATE of a row that other rows
--     reference can be executed as delete + insert, which the key then refuses (measured on 2.0.1).

create table schema_version (
    version integer primary key,
    name varchar not null,
    applied_at timestamptz not null
);

create table experiment (
    experiment_id varchar primary key,
    algorithm varchar not null,
    data varchar not null,
    init varchar not null,
    hypothesis varchar not null,
    uri varchar not null,
    created_at timestamptz not null
);

create table config (
    config_digest varchar primary key check (regexp_full_match(config_digest, '[0-9a-f]{64}')),
    config_type varchar not null,
    body json not null
);

create table run (
    run_id varchar primary key,
    stage varchar not null,
    experiment_id varchar references experiment (experiment_id),
    "trigger" varchar not null check ("trigger" in ('ui', 'schedule', 'cli', 'test')),
    flow_run_id varchar,
    git_sha varchar not null check (git_sha = 'unknown' or regexp_full_match(git_sha, '[0-9a-f]{40}([0-9a-f]{24})?')),
    git_dirty boolean not null,
    config_digest varchar not null references config (config_digest),
    started_at timestamptz not null
);

create table run_end (
    run_id varchar primary key references run (run_id),
    status varchar not null check (status in ('completed', 'failed')),
    reused boolean not null,
    finished_at timestamptz not null,
    error varchar,
    metrics json,
    check ((status = 'failed') = (error is not null))
);

create table segment (
    segment_id varchar primary key,
    run_name varchar not null,
    run_id varchar not null references run (run_id),
    experiment_id varchar references experiment (experiment_id),
    ordinal integer not null check (ordinal >= 0),
    host varchar not null,
    pid integer not null check (pid > 0),
    resumed_from_segment varchar references segment (segment_id),
    resumed_from_step bigint check (resumed_from_step >= 0),
    started_at timestamptz not null,
    unique (experiment_id, ordinal),
    unique (experiment_id, run_name),
    unique (segment_id, run_id),
    unique (segment_id, experiment_id),
    check ((resumed_from_segment is null) = (resumed_from_step is null))
);

create table segment_end (
    segment_id varchar primary key references segment (segment_id),
    ended_at timestamptz not null,
    exit_reason varchar not null
);

create table dataset_version (
    sha256 varchar primary key check (regexp_full_match(sha256, '[0-9a-f]{64}')),
    uri varchar not null,
    kind varchar not null,
    produced_by_run varchar references run (run_id),
    created_at timestamptz not null
);

create table run_input (
    run_id varchar not null references run (run_id),
    role varchar not null,
    dataset_sha256 varchar not null references dataset_version (sha256),
    primary key (run_id, role)
);

create table model_export (
    export_id varchar primary key,
    export_name varchar not null,
    experiment_id varchar not null references experiment (experiment_id),
    run_id varchar not null references run (run_id),
    segment_id varchar not null references segment (segment_id),
    step bigint not null check (step >= 0),
    uri varchar not null,
    weights_sha256 varchar not null references dataset_version (sha256),
    validated boolean not null,
    created_at timestamptz not null,
    unique (experiment_id, export_name),
    -- the segment must belong to the same run and the same experiment as the export
    foreign key (segment_id, run_id) references segment (segment_id, run_id),
    foreign key (segment_id, experiment_id) references segment (segment_id, experiment_id)
);

create table eval_protocol (
    fingerprint varchar primary key,
    spec_id varchar not null,
    body json not null,
    created_at timestamptz not null
);

create table evaluation (
    eval_id varchar primary key,
    export_id varchar not null references model_export (export_id),
    protocol_fingerprint varchar not null references eval_protocol (fingerprint),
    run_id varchar references run (run_id),
    dataset_sha256 varchar references dataset_version (sha256),
    uri varchar not null,
    started_at timestamptz not null,
    unique (eval_id, export_id)
);

create table evaluation_end (
    eval_id varchar primary key references evaluation (eval_id),
    status varchar not null check (status in ('completed', 'failed')),
    finished_at timestamptz not null
);

create table eval_trial (
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
    primary key (eval_id, row_id)
);

create table eval_metric (
    metric_id varchar primary key,
    eval_id varchar not null,
    -- carried on every metric row (ANCHORS: "every metric row carries the model and the dataset
    -- digest"): the composite key below stops the export disagreeing with the evaluation, and the
    -- writer copies both from the evaluation row
    export_id varchar not null,
    dataset_sha256 varchar references dataset_version (sha256),
    name varchar not null,
    scope varchar not null,
    value double not null,
    n integer check (n >= 0),
    unique (eval_id, name, scope),
    foreign key (eval_id, export_id) references evaluation (eval_id, export_id)
);

-- bookkeeping of the one writer: which spool files are in (so a crash between commit and the
-- archive move never applies a file twice)
create table ingested_event (
    seq ubigint primary key,
    kinds varchar[] not null,
    written_at timestamptz not null,
    ingested_at timestamptz not null
);

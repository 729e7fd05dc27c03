-- 004: what a training run records besides its export (recorded by the stage's Prefect task from
-- what the stage returns; Ray workers never write here):
--   * checkpoint: every complete checkpoint of a segment (segments/RUN/checkpoints/step_N);
--   * training_metric: one row per optimizer step per metric of a segment (its metrics.jsonl);
--   * v_training_metric: an experiment's training curve, long format (a step redone after a resume
--     shows the resumed segment's row, as curves.png does); training_curve(EXPERIMENT_ID): one
--     row per step, the main metrics as columns.
--     skillgate sql "select * from v_training_metric where experiment_id = 'grpo-...' and name = 'reward'"
--     skillgate sql "select * from training_curve('grpo-...')"

create table checkpoint (
    checkpoint_id varchar primary key,
    experiment_id varchar not null references experiment (experiment_id),
    segment_id varchar not null,
    run_id varchar not null references run (run_id),
    step bigint not null check (step >= 0),
    uri varchar not null,
    created_at timestamptz not null,
    unique (segment_id, step),
    -- the segment must belong to the same run and the same experiment as the checkpoint
    foreign key (segment_id, run_id) references segment (segment_id, run_id),
    foreign key (segment_id, experiment_id) references segment (segment_id, experiment_id)
);

create table training_metric (
    segment_id varchar not null,
    run_id varchar not null references run (run_id),
    -- copied from the segment by the writer (a metric row names its experiment without a join)
    experiment_id varchar not null references experiment (experiment_id),
    step bigint not null check (step >= 0),
    name varchar not null,
    value double not null check (isfinite(value)),
    primary key (segment_id, step, name),
    foreign key (segment_id, run_id) references segment (segment_id, run_id),
    foreign key (segment_id, experiment_id) references segment (segment_id, experiment_id)
);

-- the curve of every experiment: one row per (experiment, step, metric), from the latest segment
-- that trained that step; with the run's config and commit, and the digests of the data it trained
-- on and the model it started from (every metric row carries its model and dataset: a curve is never read apart from what made it)
create view v_training_metric as
select m.experiment_id, m.step, m.step + 1 as optimizer_step, m.name, m.value,
       m.segment_id, s.run_name, s.ordinal as segment_ordinal, m.run_id,
       r.config_digest, r.git_sha, r.git_dirty,
       d.dataset_sha256 as rl_data_sha256, i.dataset_sha256 as init_model_sha256
from training_metric m
join segment s on s.segment_id = m.segment_id
join run r on r.run_id = m.run_id
left join run_input d on d.run_id = m.run_id and d.role = 'rl_data'
left join run_input i on i.run_id = m.run_id and i.role = 'sft_model'
qualify row_number() over (partition by m.experiment_id, m.step, m.name order by s.ordinal desc) = 1;

-- one experiment's curve, one row per step (the metrics curves.png draws and a few more)
create macro training_curve(want_experiment) as table
select step, optimizer_step, any_value(segment_id) as segment_id,
       max(value) filter (where name = 'reward') as reward,
       max(value) filter (where name = 'success_rate') as success_rate,
       max(value) filter (where name = 'oracle_read_rate') as oracle_read_rate,
       max(value) filter (where name = 'misleading_read_rate') as misleading_read_rate,
       max(value) filter (where name = 'clean_oracle_rate') as clean_oracle_rate,
       max(value) filter (where name = 'selector_active_fraction') as selector_active_fraction,
       max(value) filter (where name = 'task_token_mass') as task_token_mass,
       max(value) filter (where name = 'selector_token_mass') as selector_token_mass,
       max(value) filter (where name = 'selection_token_share') as selection_token_share,
       max(value) filter (where name = 'kl') as kl,
       max(value) filter (where name = 'loss') as loss,
       max(value) filter (where name = 'clip_fraction') as clip_fraction,
       max(value) filter (where name = 'rollout_tokens_per_s') as rollout_tokens_per_s,
       max(value) filter (where name = 'train_tokens_per_s') as train_tokens_per_s,
       max(value) filter (where name = 'time_generate_s') as time_generate_s,
       max(value) filter (where name = 'time_env_s') as time_env_s,
       max(value) filter (where name = 'time_train_s') as time_train_s,
       max(value) filter (where name = 'time_sync_s') as time_sync_s,
       max(value) filter (where name = 'time_step_s') as time_step_s
from v_training_metric
where experiment_id = want_experiment
group by step, optimizer_step
order by step;

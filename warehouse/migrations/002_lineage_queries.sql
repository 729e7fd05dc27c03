-- 002: the named lineage queries, as views and table macros, so `skillgate sql` can use them too:
--   select * from metric_lineage('exp-1/eval70-step-200/trial_success');
--   select * from export_lineage('exp-1/step-200');
--   select * from experiment_exports('exp-1');
--   select * from dataset_upstream('3f2a...');   -- recursive: dataset <- run <- inputs <- ...
--   select * from run_provenance('grpo-20250101T120000-a1b2c3');

-- current state of runs, segments and evaluations (base tables are append-only, see 001)
create view v_run as
select r.*, coalesce(e.status, 'running') as status, coalesce(e.reused, false) as reused,
       e.finished_at, e.error, e.metrics
from run r left join run_end e on e.run_id = r.run_id;

create view v_segment as
select s.*, e.ended_at, e.exit_reason
from segment s left join segment_end e on e.segment_id = s.segment_id;

create view v_evaluation as
select v.*, coalesce(e.status, 'running') as status, e.finished_at
from evaluation v left join evaluation_end e on e.eval_id = v.eval_id;

-- one row per run input, with the dataset it names
create view v_run_input as
select ri.run_id, ri.role, d.sha256, d.uri, d.kind, d.produced_by_run
from run_input ri
join dataset_version d on d.sha256 = ri.dataset_sha256;

-- run -> config -> inputs, the provenance of anything a run produced
create view v_run_provenance as
select r.run_id, r.stage, r.status as run_status, r.reused, r."trigger", r.flow_run_id,
       r.git_sha, r.git_dirty, r.experiment_id as run_experiment_id, r.started_at, r.finished_at,
       c.config_digest, c.config_type, c.body as config,
       coalesce((select list(struct_pack(role := i.role, sha256 := i.sha256, uri := i.uri,
                                         kind := i.kind, produced_by_run := i.produced_by_run)
                             order by i.role)
                 from v_run_input i where i.run_id = r.run_id), []) as inputs
from v_run r
join config c on c.config_digest = r.config_digest;

-- the same for ONE run: the run filter applies before the inputs are aggregated
create macro run_provenance(want_run) as table
select r.run_id, r.stage, r.status as run_status, r.reused, r."trigger", r.flow_run_id,
       r.git_sha, r.git_dirty, r.experiment_id as run_experiment_id, r.started_at, r.finished_at,
       c.config_digest, c.config_type, c.body as config,
       coalesce((select list(struct_pack(role := i.role, sha256 := i.sha256, uri := i.uri,
                                         kind := i.kind, produced_by_run := i.produced_by_run)
                             order by i.role)
                 from v_run_input i where i.run_id = want_run), []) as inputs
from v_run r
join config c on c.config_digest = r.config_digest
where r.run_id = want_run;

-- metric -> evaluation (protocol, trials) -> export -> run -> config -> inputs, for every metric
create view v_metric_lineage as
select m.metric_id, m.name as metric, m.scope, m.value, m.n,
       e.eval_id, e.status as eval_status, e.protocol_fingerprint, p.spec_id,
       m.dataset_sha256 as eval_dataset_sha256, e.run_id as eval_run_id,
       coalesce(t.n_trials, 0) as n_trials, coalesce(t.n_resolved, 0) as n_resolved,
       coalesce(t.n_error, 0) as n_error,
       x.export_id, x.step as export_step, x.uri as export_uri, x.weights_sha256, x.validated,
       x.experiment_id, x.segment_id,
       rp.run_id, rp.stage, rp.run_status, rp."trigger", rp.flow_run_id, rp.git_sha, rp.git_dirty,
       rp.config_digest, rp.config_type, rp.config, rp.inputs
from eval_metric m
join v_evaluation e on e.eval_id = m.eval_id
join eval_protocol p on p.fingerprint = e.protocol_fingerprint
join model_export x on x.export_id = m.export_id
join v_run_provenance rp on rp.run_id = x.run_id
left join (
    select eval_id, count(*) as n_trials,
           count(*) filter (where outcome = 'resolved') as n_resolved,
           count(*) filter (where outcome = 'error') as n_error
    from eval_trial group by eval_id
) t on t.eval_id = e.eval_id;

-- the same chain for ONE metric: every part is filtered to that metric before anything is
-- aggregated (its run's inputs, its evaluation's trials), so the cost does not grow with the
-- warehouse (benchmarks/lineage_query.py: 1,000,000 eval_trial rows)
create macro metric_lineage(want_metric) as table
select m.metric_id, m.name as metric, m.scope, m.value, m.n,
       e.eval_id, e.status as eval_status, e.protocol_fingerprint, p.spec_id,
       m.dataset_sha256 as eval_dataset_sha256, e.run_id as eval_run_id,
       t.n_trials, t.n_resolved, t.n_error,
       x.export_id, x.step as export_step, x.uri as export_uri, x.weights_sha256, x.validated,
       x.experiment_id, x.segment_id,
       rp.run_id, rp.stage, rp.run_status, rp."trigger", rp.flow_run_id, rp.git_sha, rp.git_dirty,
       rp.config_digest, rp.config_type, rp.config, rp.inputs
from eval_metric m
join v_evaluation e on e.eval_id = m.eval_id
join eval_protocol p on p.fingerprint = e.protocol_fingerprint
join model_export x on x.export_id = m.export_id
join run_provenance((select x1.run_id from model_export x1 join eval_metric m1 on m1.export_id = x1.export_id
                     where m1.metric_id = want_metric)) rp on rp.run_id = x.run_id
cross join (
    select count(*) as n_trials,
           count(*) filter (where outcome = 'resolved') as n_resolved,
           count(*) filter (where outcome = 'error') as n_error
    from eval_trial
    where eval_id = (select eval_id from eval_metric where metric_id = want_metric)
) t
where m.metric_id = want_metric;

-- one export: segment, run, config, inputs, and how many evaluations scored it
create macro export_lineage(want_export) as table
select x.export_id, x.export_name, x.experiment_id, x.step, x.uri, x.weights_sha256, x.validated,
       x.created_at, s.segment_id, s.run_name, s.ordinal as segment_ordinal, s.host, s.pid,
       s.resumed_from_segment, s.resumed_from_step, s.exit_reason,
       rp.run_id, rp.stage, rp.run_status, rp."trigger", rp.flow_run_id, rp.git_sha, rp.git_dirty,
       rp.config_digest, rp.config_type, rp.config, rp.inputs,
       (select count(*) from evaluation e where e.export_id = want_export) as n_evaluations
from model_export x
join v_segment s on s.segment_id = x.segment_id
join run_provenance((select x1.run_id from model_export x1 where x1.export_id = want_export)) rp
  on rp.run_id = x.run_id
where x.export_id = want_export;

-- the exports of an experiment, by step
create macro experiment_exports(want_experiment) as table
select x.export_id, x.step, x.segment_id, x.run_id, r.status as run_status, r.git_sha, r.git_dirty, r.config_digest,
       x.weights_sha256, x.uri, x.validated, x.created_at,
       (select count(*) from evaluation e where e.export_id = x.export_id) as n_evaluations
from model_export x
join v_run r on r.run_id = x.run_id
where x.experiment_id = want_experiment
order by x.step, x.export_id;

-- everything upstream of a dataset: depth 0 is the dataset itself; each further row is an input
-- (via_role) of the run that produced the row's child. Depth is capped so a bad cycle cannot spin.
create macro dataset_upstream(want_sha256) as table
with recursive up(depth, sha256, child_sha256, via_role) as (
    select 0, d.sha256, null::varchar, null::varchar
    from dataset_version d where d.sha256 = want_sha256
    union all
    select up.depth + 1, ri.dataset_sha256, up.sha256, ri.role
    from up
    join dataset_version child on child.sha256 = up.sha256
    join run_input ri on ri.run_id = child.produced_by_run
    where up.depth < 64
)
select up.depth, up.sha256, d.kind, d.uri, d.produced_by_run, r.stage, r.git_sha, r.git_dirty,
       r.config_digest, up.via_role, up.child_sha256
from up
join dataset_version d on d.sha256 = up.sha256
left join run r on r.run_id = d.produced_by_run
order by up.depth, up.sha256;

-- Consultation (docs/reads.md): every skill any file of which a trial opened or executed (its SKILL.md, a
-- script run or read, its data), once, in order, the read ones included. Null for trials recorded before it
-- was observed (the reads stand for it). v_eval_trial repeats 005's joins with the column after seed: its
-- first columns are the eval_trials.parquet columns, in file order (evaluation/rows.py TRIAL_SCHEMA).
alter table eval_trial add column consulted_names varchar[];

create or replace view v_eval_trial as
select v.protocol_id, v.protocol_fingerprint as fingerprint, v.method, x.experiment_id, x.export_name as export_id,
       v.policy, t.task_id, t.benchmark, t."repeat", t.status, t.outcome, t.reward as score, t.raw_score,
       t.error, t.reads, t.read_names, t.first_read_category, t.skill_reasoning, t.n_turns as turns,
       t.response_tokens, t.loss_tokens, t.seconds, t.seed, t.consulted_names,
       t.eval_id, t.row_id, t.trial_index
from eval_trial t
join evaluation v on v.eval_id = t.eval_id
join model_export x on x.export_id = v.export_id;

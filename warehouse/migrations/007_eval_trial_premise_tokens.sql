-- 007: the premise's per-trial token counts (docs/method.md 8b; skillgate_core/evaluation/trials.py):
--   * eval_trial gains name_tokens, read_call_tokens, reasoning_tokens: the sampled tokens that are
--     skill-name tokens of attributed reads, those reads' whole calls, and <skill_reasoning>. Null where
--     the trial recorded no token ids (an endpoint counted by its usage) and for rows recorded before
--     007. Added without a CHECK (DuckDB cannot add a column with one; the writer only ever counts);
--   * v_eval_trial repeats 006's joins: again exactly the columns of eval_trials.parquet in file order, the
--     three after consulted_names.

alter table eval_trial add column name_tokens integer;
alter table eval_trial add column read_call_tokens integer;
alter table eval_trial add column reasoning_tokens integer;

create or replace view v_eval_trial as
select v.protocol_id, v.protocol_fingerprint as fingerprint, v.method, x.experiment_id, x.export_name as export_id,
       v.policy, t.task_id, t.benchmark, t."repeat", t.status, t.outcome, t.reward as score, t.raw_score,
       t.error, t.reads, t.read_names, t.first_read_category, t.skill_reasoning, t.n_turns as turns,
       t.response_tokens, t.loss_tokens, t.seconds, t.seed, t.consulted_names, t.name_tokens, t.read_call_tokens,
       t.reasoning_tokens,
       t.eval_id, t.row_id, t.trial_index
from eval_trial t
join evaluation v on v.eval_id = t.eval_id
join model_export x on x.export_id = v.export_id;

"""Evaluation: protocol specs, runner, metrics, regression (docs/method.md 8-9).

- `protocol`: frozen protocol identities and fingerprints, the comparison-hygiene refusal.
- `specs`: protocol spec files (specs/eval70_v1.toml, specs/slate147.toml) made concrete on a bench.
- `trials`: the per-trial row schema (eval_trials.parquet) and how a trajectory becomes a row.
- `owner`: which experiment owns the evaluation of a policy (standalone ones for unowned models).
- `runner`: policy x protocol -> owned, resumable trial rows, in lockstep batches.
- `observer`: how the runner reports to whoever records (the warehouse, from tasks/ and the CLI).
- `metrics`: trial- and task-level metrics (`pass_at_k`, `summarize_trials`, `behaviour_cost`); errors
  stay in the denominator and are also counted on their own; per-benchmark (family) breakdown.
- `rows`: reading a folder of evaluations (eval_trials.parquet), grouping by method.
- `arm_label`: a trained arm's method label PROFILE[+VARIANT...][@sN] read back; `seed_pairs`: which rows
  are compared (each arm with the baseline at its seed, an arm's seeds pooled).
- `bootstrap`: the paired task-cluster bootstrap of a method against a baseline (trial success, pass@k,
  oracle exposure, clean-oracle rate), also with seeds pooled by task; `claim`: SkillGate's claim read
  off those intervals.
- `tables`, `figures`: the paper's tables (markdown, LaTeX) and PNG figures from those rows.
- `paper`, `paper_config`: the deterministic paper build (`build_paper`, stage `paper-tables`).
- `regression`, `nightly`: the nightly's seeded task-cluster bootstrap and what it compares.
- `stage`: stage `eval70` (Eval70Config, run_eval70); `probe`: the selection probe (which of the slate's
  skills a policy would read first, without an episode).
- `recorded_episodes`: recorded episodes read back for `skillgate traj show`.
- `context_limit`: the context a model was trained to (its config or tokenizer), for the protocol warning.

    skillgate eval run --policy PATH|URL [--model NAME] --protocol eval70_v1
"""

__all__: list[str] = []

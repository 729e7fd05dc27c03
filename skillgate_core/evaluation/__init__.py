"""Evaluation: protocol specs, runner, metrics, paper tables and figures (METHOD.md 8-9).

- `metrics`: trial- and task-level metrics (`pass_at_k`, `summarize_trials`, `behaviour_cost`); errors
  stay in the denominator and are also counted on their own; per-benchmark (family) breakdown.
- `protocol`: frozen protocol specs, fingerprints and the comparison-hygiene refusal.
- `rows`: the eval_trials.parquet schema, reading a folder of evaluations, grouping by method.
- `bootstrap`: the paired task-cluster bootstrap of a method against a baseline.
- `tables`, `figures`: the paper's tables (markdown, LaTeX) and PNG figures from those rows.
- `paper`, `paper_config`: the deterministic paper build (`build_paper`, stage `paper-tables`).
"""

__all__: list[str] = []

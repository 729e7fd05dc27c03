"""Evaluation: protocol specs, runner, metrics, paper tables and figures (METHOD.md 8-9).

- `metrics`: trial- and task-level metrics (`pass_at_k`, `summarize_trials`); errors stay in the
  denominator and are also counted on their own.
- `protocol`: frozen protocol specs, fingerprints and the comparison-hygiene refusal.
"""

__all__: list[str] = []

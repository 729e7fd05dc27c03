"""Evaluation: protocol specs, runner, metrics, paper tables and figures (METHOD.md 8-9).

- `metrics`: trial- and task-level metrics (`pass_at_k`).
"""

__all__: list[str] = []

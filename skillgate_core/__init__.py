"""SkillGate core library: pure functions over paths and frozen configs.

It imports neither Prefect nor the warehouse, so every stage runs the same from a flow, the CLI, a
test or a notebook.

Its packages, one floor each (ARCHITECTURE.md draws them; import-linter keeps them): `pipeline`;
`rl`, `sft`, `evaluation`, `benchgen` (the stages); `agent` (the harness); `policy` (the models);
`credit` (the method); `skills`, `envs`, `ownership` (the world); `formats`; `base`.
"""

__version__ = "0.1.0"

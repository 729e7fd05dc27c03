"""SkillGate core library: pure functions over paths and frozen configs.

It imports neither Prefect nor the warehouse, so every stage runs the same from a flow, the CLI, a
test or a notebook.
"""

__version__ = "0.1.0"

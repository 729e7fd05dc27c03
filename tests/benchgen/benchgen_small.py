"""The small suite config the benchgen tests share (32 tasks: every family, domain and split)."""

from skillgate_core.benchgen import BenchBuildConfig

SMALL = BenchBuildConfig(seed=7, train_skills_per_cell=1, train_tasks_per_skill=1, eval_tasks=8, slate_tasks=8)

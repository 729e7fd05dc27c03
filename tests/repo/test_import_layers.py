"""The library's import layers (pyproject.toml [tool.importlinter]) hold, and a violation is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)})


def test_skillgate_core_layers_are_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _copy_with(tmp_path: Path, module: str, added: str) -> Path:
    """A copy of the contracts' roots and pyproject.toml where `module` (a path) ends with `added`."""
    for package in ("skillgate_core", "warehouse", "tasks", "flows", "deployments"):  # the contracts' roots
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    path.write_text(path.read_text() + added)
    return tmp_path


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    # A copy of the library where skills (low) imports credit (above it) must be refused.
    copy = _copy_with(tmp_path, "skillgate_core/skills/prompt.py",
                      "\nfrom skillgate_core.credit import actions as _upward  # noqa\n")
    result = _lint_imports(copy)
    assert result.returncode != 0
    assert "skillgate_core.skills is not allowed to import skillgate_core.credit" in result.stdout


def test_a_deferred_import_back_into_the_sampler_breaks_the_policy_contract(tmp_path: Path) -> None:
    # policy/ once had the library's only import circle: the fused decode step imported the sampler's
    # attention back inside a function. The same import, deferred, must be refused.
    copy = _copy_with(tmp_path, "skillgate_core/policy/static/fused_decode.py",
                      "\n\ndef _back() -> None:\n    from skillgate_core.policy.static import sampler  # noqa\n")
    result = _lint_imports(copy)
    assert result.returncode != 0
    said = " ".join(result.stdout.split())  # the report wraps long module names
    assert "the static sampler's modules are layered (no import cycle) BROKEN" in said
    assert "skillgate_core.policy.static.fused_decode -> skillgate_core.policy.static.sampler" in said


# The GPU machine's path for the learning result (docs/gpu.md, benchmarks/gpu/learning_result.py): the
# stage functions of init-model, collect, sft, rl-data-prep, grpo, eval70 and paper-tables, plus the runner.
GPU_PATH_MODULES = (
    "skillgate_core.rl.grpo", "skillgate_core.rl.grpo_stage", "skillgate_core.agent.policies",
    "skillgate_core.policy.tiny_model", "skillgate_core.agent.collect", "skillgate_core.sft.trainer",
    "skillgate_core.rl.data_prep", "skillgate_core.rl.rl_tasks", "skillgate_core.evaluation.stage",
    "skillgate_core.evaluation.runner", "skillgate_core.evaluation.trials", "skillgate_core.evaluation.paper",
    "skillgate_core.pipeline.run", "skillgate_core.base.parquet_rows",
)


def test_the_training_path_imports_without_polars_duckdb_prefect_or_bm25() -> None:
    # The GPU machine carries only what the training path needs (docs/gpu.md, What travels): rollouts,
    # credit, the trainer, the sft and eval70 stages and the paper build must not import the
    # orchestrator, the warehouse or polars at import time.
    from support.gpu_machine import run_without_absent

    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in GPU_PATH_MODULES)
    code += "from skillgate_core.pipeline.stages import get_stage\n"
    code += "".join(f"get_stage({s!r}).run_function()\n" for s in
                    ("init-model", "collect", "sft", "rl-data-prep", "grpo", "eval70", "paper-tables"))
    result = run_without_absent(code, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_policy_tests_import_on_the_gpu_machine() -> None:
    # 2026-12-01 the turn-cache tests could not start on the H200: their fixtures imported the bench builder
    # (polars). smollm2.sh runs tests/policy/test_turn_cache.py there before any arm samples with the cache.
    from support.gpu_machine import run_without_absent

    code = "import sys; sys.path.insert(0, 'tests'); sys.path.insert(0, 'tests/policy')\n"
    code += "import runpy; runpy.run_path('tests/conftest.py')\n"  # the root conftest registers the shared fixtures
    code += "import support.tiny_fixtures, conftest, test_turn_cache\n"
    result = run_without_absent(code, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]

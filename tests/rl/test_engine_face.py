"""The engine room's face (skillgate_core/rl/engine/__init__.py): every public name of its modules, and
nothing imported until a name is asked for."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import skillgate_core.rl.engine as engine

ROOM = Path(engine.__file__).parent


def _listed() -> dict[str, set[str]]:
    """The names the face's TYPE_CHECKING block imports, by module."""
    tree = ast.parse((ROOM / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    return {node.module.rsplit(".", 1)[-1]: {a.name for a in node.names}
            for node in block.body if isinstance(node, ast.ImportFrom) and node.module}


def test_the_face_lists_every_module_and_exactly_its_public_names():
    modules = {p.stem for p in ROOM.glob("*.py") if p.stem != "__init__"}
    assert set(engine.MODULES) == modules
    listed = _listed()
    assert set(listed) == modules
    for name in modules:
        assert listed[name] == set(importlib.import_module(f"{engine.__name__}.{name}").__all__), name


def test_every_listed_name_is_its_module_object_and_a_typo_names_the_modules():
    for module, names in _listed().items():
        defining = importlib.import_module(f"{engine.__name__}.{module}")
        for name in names:
            assert getattr(engine, name) is getattr(defining, name)
    with pytest.raises(AttributeError, match="build_engin.*zero_choice"):
        _ = engine.build_engin  # type: ignore[attr-defined]


def test_the_face_and_zero_choice_import_without_torch():
    # rl.grpo_config (read by the CLI's config checks) imports zero_choice through this package: torch there
    # would cost every command seconds (tests/orchestration/test_cli_startup.py)
    code = ("import sys\nimport skillgate_core.rl.engine\nfrom skillgate_core.rl.engine import choose_zero, ZeroStage\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:3]\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=ROOM.parents[2])
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_engine_room_imports_nothing_of_the_method_above_it():
    # the method (grpo, loss, samples, rollouts, ...) stands on the room, never the other way: the room can
    # be read, tested and benchmarked (benchmarks/gpu) without the method
    import grimp

    graph = grimp.build_graph("skillgate_core", cache_dir=None)
    room = {m for m in graph.modules if m == engine.__name__ or m.startswith(engine.__name__ + ".")}
    upward = sorted(f"{m} -> {d}" for m in room for d in graph.find_modules_directly_imported_by(m)
                    if d.startswith("skillgate_core.rl") and d not in room)
    assert upward == []

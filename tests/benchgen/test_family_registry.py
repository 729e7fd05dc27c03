"""A bundled benchmark family is registered once (benchgen.families.FAMILIES): the suite's default families,
the config check and the scripts pasted into task packages all read that registry, and each family names
its own engine where it is declared."""

from __future__ import annotations

import inspect

import pytest

from skillgate_core.benchgen.engines import check_script, solution_script, tool_script
from skillgate_core.benchgen.families import FAMILIES
from skillgate_core.benchgen.families import planning as planning_family
from skillgate_core.benchgen.families.base import declare_family
from skillgate_core.benchgen.suite_config import FAMILY_NAMES, BenchBuildConfig


def test_the_suite_families_are_the_registry():
    assert FAMILY_NAMES == tuple(FAMILIES) and BenchBuildConfig().families == tuple(FAMILIES)
    with pytest.raises(ValueError, match=rf"families: expected distinct values from {tuple(FAMILIES)!r}".replace("(", r"\(")
                       .replace(")", r"\)")):
        BenchBuildConfig(families=("nope",))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_family_names_its_own_engine_and_the_scripts_paste_it(name: str):
    family = FAMILIES[name]
    assert family.engine.__name__ == f"skillgate_core.benchgen.engines.{name}"
    solve_source = inspect.getsource(family.engine.solve)
    assert solve_source in tool_script(family.engine, {}, "t")
    assert solve_source in solution_script(family.engine, {})
    assert solve_source in check_script(family.engine, {}, {})


def test_a_family_declared_with_another_familys_engine_is_refused():
    parts = {k: getattr(planning_family, k) for k in ("THEMES", "TOOL_FILE", "NAIVE", "sample", "mutate", "inputs",
                                                      "instruction", "describe", "body")}
    module = {"__name__": "skillgate_core.benchgen.families.planning", **parts}
    with pytest.raises(TypeError, match="engine skillgate_core.benchgen.engines.procedural is not "
                                        "benchgen/engines/planning.py"):
        declare_family(module, engine=FAMILIES["procedural"].engine, structure="x", noun={}, suffixes=())

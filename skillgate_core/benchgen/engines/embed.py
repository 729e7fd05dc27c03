"""Paste an engine into a standalone python3 script: helpers + engine + parameters + entry call.

    engine = FAMILIES["procedural"].engine                          # benchgen.families: the family registry
    tool_script(engine, params, title="kestrel ledger export")      # solve, write outputs
    tool_script(engine, params, title, steps=4)                    # one step of a 4-step procedure
    solution_script(engine, params, seal)                          # the reference solution
    check_script(engine, params, input_sha256, seal)               # verify, exit 0/1

The result needs only python3's standard library (task sandboxes have nothing else). Module
docstrings and the `# embed-drop` import lines are left out; the rest is the tested source.
"""

from __future__ import annotations

import ast
import pprint
from functools import cache
from pathlib import Path
from types import ModuleType

from skillgate_core.benchgen.engines import common
from skillgate_core.benchgen.engines import steps as stepped

__all__ = ["check_script", "solution_script", "tool_script"]

_FUTURE = "from __future__ import annotations"


@cache
def _body(module: ModuleType) -> str:
    """The module's source without its docstring, its future import and its embed-drop lines."""
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    first = tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = lines[first.end_lineno or 0:]
    kept = [ln for ln in lines if ln.strip() != _FUTURE and not ln.rstrip().endswith("# embed-drop")]
    return "\n".join(kept).strip("\n")


def _params_text(params: dict) -> str:
    return "PARAMS = " + pprint.pformat(params, indent=1, width=100, sort_dicts=True)


def _seal_text(seal: dict | None) -> str:
    return "SEAL = " + pprint.pformat(seal, indent=1, width=100, sort_dicts=True)


def tool_script(engine: ModuleType, params: dict, title: str, steps: int = 0) -> str:
    """A skill's script: with `steps` 0 it runs the family's solver with `params` on the current
    directory; with K >= 1 it is one step of a K-step procedure (engines/steps.py), the last of which
    writes the output and its seal."""
    if steps:
        parts = [_body(stepped), f"STEPS = {int(steps)}",
                 'if __name__ == "__main__":\n    step_main(solve, PARAMS, STEPS)']
    else:
        parts = ['if __name__ == "__main__":\n    tool_main(solve, PARAMS)']
    return "\n\n".join([
        f'#!/usr/bin/env python3\n"""{title}: run from the task\'s working directory (python3 stdlib only)."""\n'
        f"{_FUTURE}",
        _body(common),
        _body(engine),
        _params_text(params),
        *parts,
    ]) + "\n"


def solution_script(engine: ModuleType, params: dict, seal: dict | None = None) -> str:
    """The reference solution: the family's solver with the oracle's `params` (and, for a stepped
    procedure, the expected seal {"path", "ticket"} written beside the output)."""
    if seal is None:
        return tool_script(engine, params, "reference solution")
    return "\n\n".join([
        '#!/usr/bin/env python3\n"""reference solution: run from the task\'s working directory."""\n' + _FUTURE,
        _body(common),
        _body(engine),
        _body(stepped),
        _params_text(params),
        _seal_text(seal),
        'if __name__ == "__main__":\n    tool_main(sealed_solve(solve, SEAL), PARAMS)',
    ]) + "\n"


def check_script(engine: ModuleType, params: dict, input_sha256: dict[str, str], seal: dict | None = None) -> str:
    """The verifier: recompute from the (digest-checked) inputs, exit 0 when the workspace passes; with a
    `seal` {"path", "ticket"} (a stepped procedure) the seal file must hold the expected last ticket."""
    digests = "INPUT_SHA256 = " + pprint.pformat(dict(sorted(input_sha256.items())), indent=1, width=100)
    if seal is None:
        parts = ['if __name__ == "__main__":\n    check_main(check, PARAMS, INPUT_SHA256)']
    else:
        parts = [_body(stepped), _seal_text(seal),
                 'if __name__ == "__main__":\n    check_main(sealed_check(check, SEAL), PARAMS, INPUT_SHA256)']
    return "\n\n".join([
        '#!/usr/bin/env python3\n"""Verifier: recomputes the expected result from the task inputs. '
        'Usage: check.py [WORKSPACE]."""\n' + _FUTURE,
        _body(common),
        _body(engine),
        _params_text(params),
        digests,
        *parts,
    ]) + "\n"

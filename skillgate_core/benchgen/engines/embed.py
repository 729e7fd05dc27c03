"""Paste an engine into a standalone python3 script: helpers + engine + parameters + entry call.

    tool_script("procedural", params, title="kestrel ledger export")   # solve, write outputs
    check_script("procedural", params, input_sha256)                  # verify, exit 0/1

The result needs only python3's standard library (task sandboxes have nothing else). Module
docstrings and the `# embed-drop` import lines are left out; the rest is the tested source.
"""

from __future__ import annotations

import ast
import pprint
from functools import cache
from pathlib import Path
from types import ModuleType

from skillgate_core.benchgen.engines import common, constraints, diagnosis, planning, procedural

__all__ = ["ENGINES", "check_script", "tool_script"]

ENGINES: dict[str, ModuleType] = {
    "procedural": procedural,
    "diagnosis": diagnosis,
    "constraints": constraints,
    "planning": planning,
}
"""Engine module per family name."""

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


def _engine(family: str) -> ModuleType:
    try:
        return ENGINES[family]
    except KeyError:
        raise ValueError(f"family: expected one of {sorted(ENGINES)}, got {family!r}") from None


def _params_text(params: dict) -> str:
    return "PARAMS = " + pprint.pformat(params, indent=1, width=100, sort_dicts=True)


def tool_script(family: str, params: dict, title: str) -> str:
    """A script that runs the family's solver with `params` on the current directory."""
    return "\n\n".join([
        f'#!/usr/bin/env python3\n"""{title}: run from the task\'s working directory (python3 stdlib only)."""\n'
        f"{_FUTURE}",
        _body(common),
        _body(_engine(family)),
        _params_text(params),
        'if __name__ == "__main__":\n    tool_main(solve, PARAMS)',
    ]) + "\n"


def check_script(family: str, params: dict, input_sha256: dict[str, str]) -> str:
    """The verifier: recompute from the (digest-checked) inputs, exit 0 when the workspace passes."""
    digests = "INPUT_SHA256 = " + pprint.pformat(dict(sorted(input_sha256.items())), indent=1, width=100)
    return "\n\n".join([
        '#!/usr/bin/env python3\n"""Verifier: recomputes the expected result from the task inputs. '
        'Usage: check.py [WORKSPACE]."""\n' + _FUTURE,
        _body(common),
        _body(_engine(family)),
        _params_text(params),
        digests,
        'if __name__ == "__main__":\n    check_main(check, PARAMS, INPUT_SHA256)',
    ]) + "\n"

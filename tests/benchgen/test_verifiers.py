"""The task verifiers recompute from the inputs: they accept any correct solution, reject plausible
wrong ones, and refuse a workspace whose inputs were edited. In-process on the engines, and once
per family through the standalone tests/check.py a package ships."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from skillgate_core.benchgen.engines import check_script, constraints, planning
from skillgate_core.benchgen.engines.common import text_sha256
from skillgate_core.benchgen.families import FAMILIES, STRATEGIES


def draw(family: str, seed: int = 3):
    fam = FAMILIES[family]
    rng = random.Random(f"verifier-test:{family}:{seed}")
    draft = fam.sample(rng, fam.domains[seed % len(fam.domains)])
    return draft, dict(draft.params), fam.inputs(rng, draft)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_oracle_passes_and_every_lookalike_fails(family: str):
    slips = []
    for seed in range(4):
        draft, params, files = draw(family, seed)
        engine = FAMILIES[family].engine
        check = engine.checker(params, files)
        assert check({**files, **engine.solve(params, files)}) == []
        fam = FAMILIES[family]
        for strategy in STRATEGIES:
            look = fam.mutate(draft, strategy, random.Random(f"{seed}:{strategy}"))
            changed = [k for k in params if params[k] != look.params[k]]
            assert len(changed) == 1, f"{strategy} must change exactly one parameter, changed {changed}"
            if not check({**files, **engine.solve(dict(look.params), files)}):
                slips.append((seed, strategy))
    # A rare draw may let one lookalike pass (the suite then draws again: task_gen.py).
    assert len(slips) <= 1, slips


def test_procedural_accepts_crlf_and_rejects_one_changed_line():
    _, params, files = draw("procedural")
    (path, text), = FAMILIES["procedural"].engine.solve(params, files).items()
    check = FAMILIES["procedural"].engine.checker(params, files)
    assert check({**files, path: text.replace("\n", "\r\n")}) == []
    lines = text.splitlines()
    wrong = lines[:]
    wrong[1] = wrong[1] + "0"
    assert check({**files, path: "\n".join(wrong) + "\n"})
    assert check({**files, path: "\n".join(lines[:-1]) + "\n"}), "a missing trailer must fail"
    assert check(files) == [f"{path}: missing"]


def test_diagnosis_accepts_any_row_order_without_header_and_rejects_one_wrong_cause():
    _, params, files = draw("diagnosis")
    causes = FAMILIES["diagnosis"].engine.causes(params, files)
    check = FAMILIES["diagnosis"].engine.checker(params, files)
    rows = [f"{inc},{cause}" for inc, cause in causes.items()]
    random.Random(0).shuffle(rows)
    assert check({**files, params["output"]: "\n".join(rows) + "\n"}) == []
    first = next(iter(causes))
    other = next(r["cause"] for r in params["rules"] if r["cause"] != causes[first])
    wrong = {**causes, first: other}
    assert check({**files, params["output"]: "".join(f"{i},{c}\n" for i, c in wrong.items())})
    fewer = dict(list(causes.items())[1:])
    assert check({**files, params["output"]: "".join(f"{i},{c}\n" for i, c in fewer.items())})


def test_constraints_accepts_another_valid_assignment_and_rejects_a_broken_rule():
    _, params, files = draw("constraints")
    check = FAMILIES["constraints"].engine.checker(params, files)
    items, bins = constraints.load_data(params, files)
    # Another valid answer: first-fit over the bins in reverse id order (a different assignment).
    flipped, left = constraints.first_fit(params, sorted(items, key=lambda i: (-i["size"], i["id"]))[::-1],
                                          list(reversed(bins)))
    reference = constraints.assign(params, files)
    header = f"{params['item_cols']['id']},{params['bin_cols']['id']}\n"
    if not left:
        assert flipped != reference
        assert check({**files, params["output"]: header + "".join(f"{i},{b}\n" for i, b in flipped.items())}) == []
    # Columns given in the other order, named by the header, are still correct.
    swapped = f"{params['bin_cols']['id']},{params['item_cols']['id']}\n" + "".join(
        f"{b},{i}\n" for i, b in reference.items())
    assert check({**files, params["output"]: swapped}) == []
    blocked = next(b["id"] for b in bins if b["state"] != params["usable_state"])
    moved = {**reference, next(iter(reference)): blocked}
    assert check({**files, params["output"]: header + "".join(f"{i},{b}\n" for i, b in moved.items())})


def test_planning_accepts_another_valid_order_and_rejects_a_swap():
    _, params, files = draw("planning")
    check = FAMILIES["planning"].engine.checker(params, files)
    steps = planning.load_steps(params, files)
    required = planning.edges(params, steps)
    # Another valid order: topological with the largest id first among ready steps.
    flip = {s["id"]: f"{999999 - int(s['id'].split('-')[1]):06d}" for s in steps}
    back = {v: k for k, v in flip.items()}
    other = [back[i] for i in planning.topo_order(sorted(flip.values()), {(flip[a], flip[b]) for a, b in required})]
    reference = [s["id"] for s in planning.plan(params, files)]
    assert other != reference
    assert check({**files, params["output"]: "\n".join(other) + "\n"}) == []
    a, b = sorted(required)[0]
    order = reference[:]
    i, j = order.index(a), order.index(b)
    order[i], order[j] = order[j], order[i]
    assert check({**files, params["output"]: "\n".join(order) + "\n"})
    assert check({**files, params["output"]: "\n".join(reference[:-1]) + "\n"}), "a missing step must fail"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_standalone_check_script_grades_and_detects_edited_inputs(tmp_path: Path, family: str):
    _, params, files = draw(family)
    script = tmp_path / "check.py"
    script.write_text(check_script(FAMILIES[family].engine, params, {rel: text_sha256(t) for rel, t in files.items()}))
    work = tmp_path / "app"
    for rel, text in {**files, **FAMILIES[family].engine.solve(params, files)}.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)

    def grade() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-I", str(script), str(work)], capture_output=True, text=True)

    assert grade().returncode == 0, grade().stdout
    # Shrinking an input (fewer records -> an easier expected answer) is caught by the digests.
    victim = work / sorted(files)[0]
    victim.write_text("\n".join(victim.read_text().splitlines()[:2]) + "\n")
    result = grade()
    assert result.returncode == 1 and "missing or modified" in result.stdout

"""One unreadable record file (run.json, experiment.json, an export's lineage.json, eval.json) is
reported by name with what is wrong; `skillgate experiments` and `warehouse verify` go on with the
rest instead of failing as a whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.skillgate_cli import run_skillgate
from wh_scenario import Scenario

from skillgate_core.ownership import create_experiment, experiment_dir
from warehouse import verify


def _segment(sc: Scenario) -> Path:
    return experiment_dir(sc.root, "exp-1").segment_file("seg-a")


def _export(sc: Scenario) -> Path:
    return experiment_dir(sc.root, "exp-1").export("step-10") / "lineage.json"


def _eval(sc: Scenario) -> Path:
    return experiment_dir(sc.root, "exp-1").eval_file("eval70-step-20")


def _experiment(sc: Scenario) -> Path:
    create_experiment(sc.root, "exp-0", algorithm="a", data="d", init="i", hypothesis="h")  # sorts first
    return experiment_dir(sc.root, "exp-0").experiment_file


def _rewrite(key: str, value: object) -> Callable[[Path], str]:
    def damage(path: Path) -> str:
        body = json.loads(path.read_text())
        body[key] = value
        path.write_text(json.dumps(body))
        return key
    return damage


def _write(data: bytes, says: str) -> Callable[[Path], str]:
    def damage(path: Path) -> str:
        path.write_bytes(data)
        return says
    return damage


DAMAGE: dict[str, Callable[[Path], str]] = {
    "not-json": _write(b'{"experiment_id": ', "JSON"),
    "not-utf8": _write(b"\xff\xfe\x00garbage", "UTF-8"),
    "a-list": _write(b"[1, 2]", "expected"),
    "wrong-type": _rewrite("created_at", {"a": 1}),
}
SEGMENT_DAMAGE = {**DAMAGE, "wrong-type": _rewrite("ordinal", "first"), "renamed": _rewrite("run_name", "../../x")}
EVAL_DAMAGE = {**DAMAGE, "wrong-type": _rewrite("started_at", {"a": 1}), "renamed": _rewrite("eval_id", "other")}
FILES = {"segment": (_segment, SEGMENT_DAMAGE), "export": (_export, DAMAGE), "eval": (_eval, EVAL_DAMAGE),
         "experiment": (_experiment, DAMAGE)}
CASES = [(f, d) for f, (_, damages) in FILES.items() for d in damages]


def _damage(sc: Scenario, which: str, how: str) -> tuple[Path, str]:
    locate, damages = FILES[which]
    path = locate(sc)
    return path, damages[how](path)


@pytest.mark.parametrize(("which", "how"), CASES)
def test_verify_reports_the_bad_record_and_checks_the_rest(scenario: Scenario, which: str, how: str):
    path, says = _damage(scenario, which, how)
    report = verify(scenario.state)
    bad = [d for d in report.drift if d.kind == "unreadable-record"]
    assert [d.subject for d in bad] == [str(path)], report.drift
    assert says in bad[0].detail, bad[0].detail
    # the rest was checked: nothing else drifts, and what it hides is not called missing
    assert [d for d in report.drift if d.kind != "unreadable-record"] == [], report.drift
    assert report.checked["experiments"] >= 1 and report.checked["runs"] == 4


@pytest.mark.parametrize(("which", "how"), [("segment", "not-json"), ("experiment", "a-list"), ("export", "not-utf8"),
                                            ("eval", "wrong-type"), ("segment", "renamed")])
def test_cli_names_the_bad_record_and_lists_the_rest(scenario: Scenario, which: str, how: str):
    path, says = _damage(scenario, which, how)
    shown = {}
    for args in (["experiments"], ["experiments", "--json"], ["warehouse", "verify"], ["warehouse", "verify", "--json"]):
        proc = shown[" ".join(args)] = run_skillgate(*args, home=scenario.state.home)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        if args != ["warehouse", "verify"]:  # (the drift table folds long paths)
            assert str(path) in proc.stdout + proc.stderr, (args, proc.stdout, proc.stderr)
        assert ("exp-1" if args[0] == "experiments" else "unreadable-record") in proc.stdout, (args, proc.stdout)
    listing = json.loads(shown["experiments --json"].stdout)
    exp1 = listing["exp-1"]
    assert {x["export_id"] for x in exp1["exports"]} == ({"step-20"} if which == "export" else {"step-10", "step-20"})
    assert len(exp1["segments"]) == (1 if which == "segment" else 2)

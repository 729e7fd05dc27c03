"""Stepped procedures (bench-build procedure_steps K): the script alone solves nothing, one wrong step
scores 0, a lookalike carried out perfectly scores 0, and the validity gate holds at every K. Real
sandboxes (bubblewrap and Docker), graded by each task's own verifier."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from benchgen_small import SMALL

from skillgate_core.benchgen import build_suite, gate_suite
from skillgate_core.benchgen.agents import follower_agent
from skillgate_core.benchgen.engines.steps import chain_tickets, next_ticket, order_ticket, step_main
from skillgate_core.benchgen.stepped import procedure_codes, task_seal
from skillgate_core.envs.scripted_episode import run_scripted_episode
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.skills import read_slate, slate_skills_dir
from skillgate_core.skills.procedure import extract_procedure, is_stepped, procedure_steps, task_work_order

ONE_PER_FAMILY = replace(SMALL, domains=("data-formats",), eval_tasks=4, slate_tasks=4)


@pytest.fixture(scope="module")
def stepped_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bench = tmp_path_factory.mktemp("stepped") / "bench"
    build_suite(replace(ONE_PER_FAMILY, procedure_steps=3), bench)
    return bench


def _rows(bench: Path) -> list[dict]:
    return [json.loads(line) for line in (bench / "tasks.jsonl").read_text().splitlines()]


def test_tickets_chain_every_step_and_differ_for_any_wrong_value():
    codes = ["amber-12", "onyx-40", "zinc-77"]
    tickets = chain_tickets("WO-12345", codes)
    assert len(tickets) == 3 and len(set(tickets)) == 3 and all(len(t) == 8 for t in tickets)
    assert tickets[0] == next_ticket(order_ticket("WO-12345"), "ingest", "amber-12")
    assert chain_tickets("WO-12346", codes)[-1] != tickets[-1]
    for i in range(3):
        wrong = [*codes]
        wrong[i] = wrong[i][:-1] + ("1" if wrong[i].endswith("0") else "0")
        assert chain_tickets("WO-12345", wrong)[-1] != tickets[-1]
    assert chain_tickets("WO-12345", [codes[1], codes[0], codes[2]])[-1] != tickets[-1]  # order matters
    assert procedure_codes(random.Random(1), 8) != procedure_codes(random.Random(2), 8)
    with pytest.raises(ValueError, match="procedure_steps"):
        procedure_codes(random.Random(1), 9)


def test_a_step_refuses_malformed_arguments_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    solve = lambda params, files: {"out.txt": "x\n"}  # noqa: E731
    for argv in ([], ["step", "1", "--code", "a-1"], ["step", "2", "--order", "WO-1", "--code", "a-1"],
                 ["step", "4", "--ticket", "ABCDEF12", "--code", "a-1"], ["step", "1", "--order", "W", "--code"]):
        with pytest.raises(SystemExit) as stop:
            step_main(solve, {"output": "out.txt"}, 3, argv)
        assert stop.value.code == 2
    assert not list(tmp_path.iterdir())
    step_main(solve, {"output": "out.txt"}, 3, ["step", "3", "--ticket", "ABCDEF12", "--code", "a-1"])
    assert (tmp_path / "out.txt").read_text() == "x\n"
    assert (tmp_path / "out.txt.seal").read_text().strip() == next_ticket("ABCDEF12", "validate", "a-1")
    assert "ticket: " in capsys.readouterr().out


def test_the_skills_say_the_steps_and_the_tasks_state_a_work_order(stepped_suite: Path):
    for row in _rows(stepped_suite):
        task = load_task_package(stepped_suite / row["path"])
        order = task_work_order(task.instruction)
        assert order is not None and order.startswith("WO-")
        assert task.config.metadata["stepped_procedure"] is True
        assert set(task.config.metadata["cue"]) == {"revision", "consumer", "scope", "output"}
        codes = []
        for name in (row["oracle"], *row["misleading"]):
            procedure = extract_procedure((stepped_suite / "skills" / name / "SKILL.md").read_text())
            assert procedure is not None and is_stepped(procedure)
            steps = procedure_steps(procedure)
            assert len(steps) == 3 and steps[0].endswith(steps[0].split("--code ")[1])
            codes.append(tuple(s.split("--code ")[1] for s in steps))
        assert len(set(codes)) == 6, "every skill of the cluster has its own codes"


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_only_the_oracle_carried_out_step_by_step_passes(stepped_suite: Path, backend: str, request, tmp_path):
    request.getfixturevalue(f"{backend}_ready")
    rows = [r for r in _rows(stepped_suite) if r["split"] == "train"]
    for row in rows[:4] if backend == "bwrap" else rows[:1]:
        task_dir = stepped_suite / row["path"]
        task = load_task_package(task_dir)
        library = slate_skills_dir(stepped_suite / "skills", read_slate(task_dir / MANIFEST_FILE).names,
                                   tmp_path / row["task_id"])
        oracle_script = f"/skills/{row['oracle']}/scripts/" + next(
            (stepped_suite / "skills" / row["oracle"] / "scripts").iterdir()).name

        def score(agent, task=task, library=library) -> float:
            outcome = run_scripted_episode(task, agent, backend=backend, skills_dir=library)
            assert outcome.status.value != "aborted", outcome
            return outcome.score

        assert score(follower_agent(row["oracle"])) == 1.0, row["task_id"]
        assert score(follower_agent(row["oracle"], miscopy_step=2)) == 0.0, "right skill, one wrong step"
        assert score(follower_agent(row["misleading"][0])) == 0.0, "wrong skill, every step right"
        assert score([oracle_script]) == 0.0, "the script alone solves nothing"
        if backend == "docker":
            break
        for wrong in row["misleading"][1:]:
            assert score(follower_agent(wrong)) == 0.0, (row["task_id"], wrong)


@pytest.mark.usefixtures("bwrap_ready")
@pytest.mark.parametrize("steps", [1, 8])
def test_the_validity_gate_holds_at_every_k(tmp_path: Path, steps: int):
    bench = tmp_path / "bench"
    build_suite(replace(ONE_PER_FAMILY, procedure_steps=steps, eval_tasks=0, slate_tasks=0), bench)
    gate = gate_suite(bench, "all", backend="bwrap", repeats=1)
    assert gate["summary"]["overall"]["valid"] == gate["summary"]["overall"]["gated"] == 4, gate["tasks"]
    row = _rows(bench)[0]
    task = load_task_package(bench / row["path"])
    seal = task_seal(task_work_order(task.instruction) or "", [
        s.split("--code ")[1] for s in procedure_steps(extract_procedure(
            (bench / "skills" / row["oracle"] / "SKILL.md").read_text()) or "")], task.config.metadata["cue"]["output"])
    assert seal["ticket"] in (bench / row["path"] / "tests" / "check.py").read_text()

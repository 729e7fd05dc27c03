"""The validity gate on the hand-written tasks (real sandboxes) and its verdict logic; the CLI rows."""

from __future__ import annotations

import json
import re
from itertools import count
from pathlib import Path

import pytest
from envtest_paths import BROKEN, GOOD
from support.skillgate_cli import run_skillgate
from typer.testing import CliRunner

from skillgate_core.envs.scripted_episode import EpisodeOutcome
from skillgate_core.envs.validity_gate import check_task, check_tasks, find_task_dirs
from skillgate_core.envs.verifier import EpisodeStatus, VerifierResult

BWRAP_GOOD = ["csv-column-sum", "hello-file", "word-stats-json"]


def test_good_tasks_pass_on_bwrap(bwrap_ready):
    reports = check_tasks([GOOD / name for name in BWRAP_GOOD], backend="bwrap")
    assert [(r.task_id, r.verdict) for r in reports] == [(n, "valid") for n in BWRAP_GOOD]
    for r in reports:
        assert r.scores("nop") == [0.0, 0.0] and r.scores("oracle") == [1.0, 1.0] and r.backend == "bwrap"


def test_good_tasks_pass_on_docker(docker_ready):
    reports = check_tasks([GOOD], backend="docker")
    assert {r.task_id: r.verdict for r in reports} == {n: "valid" for n in [*BWRAP_GOOD, "docker-only-build"]}


def test_broken_tasks_are_rejected(backend):
    by_id = {r.task_id: r for r in check_tasks([BROKEN / "passes-initial", BROKEN / "solution-fails"], backend=backend)}
    passes = by_id["passes-initial"]
    assert not passes.valid and passes.failed == ("nop",) and passes.scores("nop") == [1.0, 1.0]
    assert passes.verdict == "invalid: nop gate failed"
    fails = by_id["solution-fails"]
    assert not fails.valid and fails.failed == ("oracle",) and fails.scores("oracle") == [0.0, 0.0]


def test_docker_only_task_is_an_error_on_bwrap(bwrap_ready):
    report = check_task(GOOD / "docker-only-build", backend="bwrap")
    assert report.verdict == "error" and "needs Docker" in report.error


def _fake_runner(scores: dict[str, list[float]], status: str = "completed"):
    """A runner replaying fixed scores per agent (the verdict logic, without sandboxes)."""
    calls = {"nop": count(), "oracle": count()}

    def run(task, agent: str) -> EpisodeOutcome:
        score = scores[agent][next(calls[agent]) % len(scores[agent])]
        grade = VerifierResult(score, score, False, EpisodeStatus(status), f"reward.txt: {score:g}")
        return EpisodeOutcome(task.task_id, "fake", EpisodeStatus(status), grade)

    return run


@pytest.mark.parametrize("nop, oracle, verdict, flaky", [
    ([0.0], [1.0], "valid", False),
    ([0.0], [1.0, 0.0], "invalid: oracle gate failed, flaky", True),
    ([0.0, 0.5], [1.0], "invalid: nop gate failed, flaky", True),
    ([0.0], [0.99], "invalid: oracle gate failed", False),
    ([1.0], [0.0], "invalid: nop gate failed, oracle gate failed", False),
])
def test_verdict_logic(nop, oracle, verdict, flaky):
    report = check_task(GOOD / "hello-file", repeats=2, runner=_fake_runner({"nop": nop, "oracle": oracle}))
    assert report.verdict == verdict and report.flaky is flaky and report.valid is (verdict == "valid")
    assert len(report.trials) == 4


def test_aborted_trial_is_an_error_not_a_verdict():
    report = check_task(GOOD / "hello-file", runner=_fake_runner({"nop": [0.0], "oracle": [1.0]}, "aborted"))
    assert report.verdict == "error" and "aborted" in report.error


def test_flaky_verifier_is_caught(bwrap_ready):
    """The coin-flip verifier: over 8 oracle runs it disagrees with itself (P(miss) = 2^-7)."""
    report = check_task(BROKEN / "flaky-verifier", backend="bwrap", repeats=8)
    assert not report.valid and "oracle" in report.failed


def test_malformed_and_missing_solution(tmp_path: Path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.toml").write_text("[agent]\ntimeout_sec = 'x'\n")
    report = check_task(tmp_path / "bad")
    assert report.verdict == "error" and "agent.timeout_sec" in report.error
    import shutil

    no_solution = shutil.copytree(GOOD / "hello-file", tmp_path / "nosol")
    shutil.rmtree(no_solution / "solution")
    report = check_task(no_solution)
    assert report.verdict == "error" and "solve.sh" in report.error


def test_find_task_dirs():
    found = find_task_dirs([GOOD, BROKEN / "flaky-verifier"])
    assert [p.name for p in found] == ["csv-column-sum", "docker-only-build", "hello-file", "word-stats-json",
                                       "flaky-verifier"]


def test_cli_check_exit_codes(bwrap_ready):
    from deployments.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["task", "check", *(str(GOOD / n) for n in BWRAP_GOOD), "--backend", "bwrap", "--json"])
    assert ok.exit_code == 0, ok.output
    rows = [json.loads(line) for line in ok.stdout.splitlines()]  # stdout: only the rows (progress: stderr)
    assert [(r["task"], r["verdict"], r["nop"], r["oracle"]) for r in rows] == \
        [(n, "valid", [0.0, 0.0], [1.0, 1.0]) for n in BWRAP_GOOD]
    bad = runner.invoke(app, ["task", "check", str(GOOD / "hello-file"), str(BROKEN / "solution-fails"),
                              "--backend", "bwrap"], env={"COLUMNS": "200"})
    assert bad.exit_code == 1
    assert "hello-file" in bad.output and "valid" in bad.output and "oracle gate" in bad.output
    assert "1/2 valid" in bad.output
    empty = runner.invoke(app, ["task", "check", str(GOOD / "hello-file" / "tests")])
    assert empty.exit_code == 1 and "no task.toml" in empty.output


def test_cli_check_shows_progress_on_stderr(bwrap_ready, tmp_path: Path):
    """Long checks are not silent: off a terminal, one line with the count when the gate is done."""
    done = run_skillgate("task", "check", *(str(GOOD / n) for n in BWRAP_GOOD), "--backend", "bwrap", "--json",
                         home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"validity gate: 3/3 tasks in \d+\.\d s\n", done.stderr), done.stderr
    assert [json.loads(line)["verdict"] for line in done.stdout.splitlines()] == ["valid"] * 3


def test_check_tasks_reports_each_finished_task(bwrap_ready):
    seen: list[tuple[int, int]] = []
    reports = check_tasks([GOOD / n for n in BWRAP_GOOD], backend="bwrap", jobs=2,
                          progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)] and [r.task_id for r in reports] == BWRAP_GOOD

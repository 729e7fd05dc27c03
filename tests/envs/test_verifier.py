"""The verifier: reward parsing, clipping, the missing-reward flag, and ABORTED kept apart from 0."""

from __future__ import annotations

import math

import pytest

from skillgate_core.envs.backends import start_sandbox
from skillgate_core.envs.verifier import EpisodeStatus, parse_reward, verify


@pytest.mark.parametrize("text, kind, raw, problem", [
    ("1\n", "txt", 1.0, ""),
    (" 0.75 ", "txt", 0.75, ""),
    ("1e0", "txt", 1.0, ""),
    ("pass", "txt", None, "not a number"),
    ("nan", "txt", None, "NaN"),
    ("", "txt", None, "not a number"),
    ('{"reward": 0.5, "details": {"n": 3}}', "json", 0.5, ""),
    ("0.25", "json", 0.25, ""),
    ('{"reward": "1"}', "json", None, "no numeric 'reward'"),
    ('{"reward": true}', "json", None, "no numeric 'reward'"),
    ("{not json", "json", None, "not JSON"),
])
def test_parse_reward(text: str, kind: str, raw: float | None, problem: str):
    value, _, why = parse_reward(text, kind)
    assert value == raw and problem in why


@pytest.mark.parametrize("written, score, raw, missing", [
    ("echo 1.7 > /logs/verifier/reward.txt", 1.0, 1.7, False),
    ("echo -3 > /logs/verifier/reward.txt", 0.0, -3.0, False),
    ("echo 0.4 > /logs/verifier/reward.txt", 0.4, 0.4, False),
    ("echo '{\"reward\": 2, \"details\": \"x\"}' > /logs/verifier/reward.json", 1.0, 2.0, False),
    ("echo 0.5 > /logs/verifier/reward.txt; echo 1 > /logs/verifier/reward.json", 0.5, 0.5, False),  # txt first
    ("echo banana > /logs/verifier/reward.txt", 0.0, None, True),
    ("echo 'no reward written'; exit 3", 0.0, None, True),
    ("echo 1 > /logs/verifier/reward.txt; exit 1", 1.0, 1.0, False),  # a failing exit keeps the written score
])
def test_scores_are_clipped_and_missing_is_flagged(make_task, bwrap_ready, written, score, raw, missing):
    task = make_task(test_sh=written + "\n")
    with start_sandbox(task, backend="bwrap") as box:
        result = verify(box, task)
    assert (result.score, result.raw_score, result.missing_reward) == (score, raw, missing)
    assert result.status is EpisodeStatus.COMPLETED and not result.aborted
    if missing:
        assert "reward" in result.detail


def test_reward_json_extra_and_truncated_status(make_task, bwrap_ready):
    task = make_task(test_sh="echo '{\"reward\": 1, \"details\": {\"passed\": 4}}' > /logs/verifier/reward.json\n")
    with start_sandbox(task, backend="bwrap") as box:
        result = verify(box, task, EpisodeStatus.TRUNCATED)
    assert result.resolved and result.status is EpisodeStatus.TRUNCATED
    assert result.extra == {"details": {"passed": 4}} and result.reward_file.endswith("reward.json")


def test_verifier_sees_env_and_workdir(make_task, bwrap_ready):
    task = make_task(toml='[verifier]\nenv = { WANT = "yes" }\n',
                     dockerfile="FROM x\nWORKDIR /work/dir\nENV FROM_IMAGE=1\n",
                     test_sh='[ "$WANT$FROM_IMAGE" = yes1 ] && [ "$PWD" = /work/dir ] && [ -f /tests/test.sh ] '
                             "&& echo 1 > /logs/verifier/reward.txt\n")
    with start_sandbox(task, backend="bwrap") as box:
        assert verify(box, task).score == 1.0


def test_verifier_timeout_in_a_live_sandbox_is_a_graded_zero(make_task, backend):
    # Not ABORTED: an agent that makes the tests hang (a FIFO at the graded path) must earn its 0,
    # not a dropped group.
    task = make_task(toml="[verifier]\ntimeout_sec = 1.5\n", test_sh="sleep 60; echo 1 > /logs/verifier/reward.txt\n")
    with start_sandbox(task, backend=backend) as box:
        result = verify(box, task)
    assert result.status is EpisodeStatus.COMPLETED and not result.aborted and not result.missing_reward
    assert result.score == 0.0 and result.raw_score == 0.0 and "timed out after 1.5 s" in result.detail
    assert result.extra == {"verifier_timeout": True}


def test_a_fifo_at_the_graded_path_earns_a_zero(make_task, backend):
    task = make_task(toml="[verifier]\ntimeout_sec = 2\n",
                     test_sh='[ "$(cat greeting.txt)" = hello ] && echo 1 > /logs/verifier/reward.txt '
                             "|| echo 0 > /logs/verifier/reward.txt\n")
    with start_sandbox(task, backend=backend) as box:
        assert box.exec("mkfifo greeting.txt").exit_code == 0
        result = verify(box, task)
    assert not result.aborted and result.score == 0.0 and result.raw_score == 0.0


def test_dead_sandbox_is_aborted(make_task, backend):
    task = make_task(test_sh="echo 1 > /logs/verifier/reward.txt\n")
    box = start_sandbox(task, backend=backend)
    if backend == "docker":  # killed from outside, as a crashed daemon or OOM would
        box.api.remove_container(box.container_id, force=True)
    else:
        box.stop()
    result = verify(box, task)
    box.stop()
    assert result.status is EpisodeStatus.ABORTED and result.score == 0.0
    assert "infrastructure failure" in result.detail or "not running" in result.detail


def test_aborted_episode_is_not_verified(make_task, bwrap_ready):
    task = make_task(test_sh="echo 1 > /logs/verifier/reward.txt\n")
    with start_sandbox(task, backend="bwrap") as box:
        result = verify(box, task, EpisodeStatus.ABORTED)
    assert result.aborted and not box.verifying and math.isclose(result.score, 0.0)


@pytest.mark.parametrize("link", ["/tests/expected.txt", "../tests/expected.txt", "/logs/verifier/../../tests/expected.txt"])
def test_a_link_to_the_tests_own_expected_file_is_not_graded(make_task, backend, link):
    # The tests ship their expected output; a workspace link to it must not pass for the output.
    task = make_task(test_sh='cmp -s greeting.txt /tests/expected.txt && echo 1 > /logs/verifier/reward.txt '
                             "|| echo 0 > /logs/verifier/reward.txt\n",
                     files={"tests/expected.txt": "hello\n"})
    with start_sandbox(task, backend=backend) as box:
        assert box.exec(f"ln -s {link} greeting.txt").exit_code == 0
        assert verify(box, task).score == 0.0
    with start_sandbox(task, backend=backend) as box:  # the honest output still passes
        assert box.exec("printf 'hello\\n' > greeting.txt").exit_code == 0
        assert verify(box, task).score == 1.0

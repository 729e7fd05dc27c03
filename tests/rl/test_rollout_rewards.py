"""What an episode's grade means to the dynamic filter (docs/method.md 3 and 5): a verifier that ran and wrote
no reward is a graded 0 (flagged), an infrastructure failure rejects the whole group."""

from __future__ import annotations

from skillgate_core.agent.trajectory import Trajectory
from skillgate_core.credit import RolloutStepFilter
from skillgate_core.credit.groups import RejectReason
from skillgate_core.credit.spans import SpanReport
from skillgate_core.rl.rollouts import Episode


def episode(score: float | None, *, missing: bool = False, status: str = "completed") -> Episode:
    traj = Trajectory(task_id="t", bench="b", repeat=0, policy="p", prompt_profile="x", slate_names=(),
                      slate_categories=(), gold=None, messages=(), prompt_ids=(1,), response_ids=(2,), loss_mask=(1,),
                      logprobs=(0.0,), turns=(), status=status, score=score or 0.0, raw_score=score,
                      missing_reward=missing, verifier_detail="", backend="none", duration_s=0.0)
    return Episode(traj, SpanReport((), 0, 0, 0, 0), False)


def test_a_missing_reward_is_a_graded_zero_and_an_aborted_episode_rejects_its_group():
    dodged = episode(None, missing=True)
    assert dodged.score == 0.0 and not dodged.aborted and dodged.evidence().score == 0.0
    assert episode(0.5).score == 0.5
    broken = episode(None, status="aborted")
    assert broken.aborted and broken.score is None and broken.evidence().aborted

    step = RolloutStepFilter(group_size=3, check_spans=False, forces=False)
    kept = step.judge([e.evidence() for e in (dodged, episode(1.0), episode(0.0))], slate=None)
    assert kept.accepted  # the agent that kept the tests from writing a reward earns its 0 in a trained group
    dropped = step.judge([e.evidence() for e in (broken, episode(1.0), episode(0.0))], slate=None)
    assert not dropped.accepted and dropped.reason is RejectReason.EPISODE_ABORTED

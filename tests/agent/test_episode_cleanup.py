"""`run_episodes` releases every sandbox it started when anything raises: the policy (an error or
Ctrl-C mid-batch), a tool, the verifier; on both backends nothing is left (no container or volume
with the session's labels, no bubblewrap session folder, process or cgroup)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from support.sandbox_fixtures import REPO

from skillgate_core.agent import episode
from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, EpisodeView, run_episodes
from skillgate_core.agent.tools import ToolBox
from skillgate_core.envs.cgroups import cgroup_names
from skillgate_core.envs.sandbox import Sandbox
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.policy.corpus import build_corpus
from skillgate_core.policy.local_sampler import Completion
from skillgate_core.policy.tiny_model import TinyModelConfig, train_tokenizer

TASK = REPO / "tests" / "envs" / "tasks" / "good" / "hello-file"


@pytest.fixture(scope="module")
def tokenizer():
    cfg = TinyModelConfig(vocab_size=600, corpus_lines=300)
    return train_tokenizer(cfg, build_corpus(cfg.corpus_lines, cfg.seed))


@pytest.fixture
def sandbox_config() -> Iterator[SandboxConfig]:
    """Sessions in a folder of this test alone (as root the sandbox uid must traverse it: /var/tmp, 0711)."""
    folder = Path(tempfile.mkdtemp(prefix="skillgate-cleanup-test-", dir="/var/tmp"))
    folder.chmod(0o711)
    yield SandboxConfig(sessions_dir=str(folder))
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Sandbox]]:
    """Every sandbox run_episodes starts, in start order."""
    boxes: list[Sandbox] = []
    real = episode.start_sandbox

    def tracking(*args, **kwargs) -> Sandbox:
        box = real(*args, **kwargs)
        boxes.append(box)
        return box

    monkeypatch.setattr(episode, "start_sandbox", tracking)
    yield boxes
    for box in boxes:  # a safety net after the assertions: a failing test must not leak either
        box.stop()


class ScriptedPolicy:
    """Episode i runs commands[i] with the exec tool each turn; the `fail_on`-th call raises `error`."""

    name = "scripted"

    def __init__(self, tokenizer, commands: Sequence[str | None], fail_on: int | None = None,
                 error: BaseException | None = None) -> None:
        self.tokenizer, self.commands, self.fail_on, self.error = tokenizer, commands, fail_on, error
        self.calls = 0

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise self.error or RuntimeError("policy failed")
        out = []
        for view in views:
            command = self.commands[view.spec.repeat]
            text = ("<tool_call>" + json.dumps({"name": "exec", "arguments": {"command": command}}) + "</tool_call>"
                    if command else "Done.")
            ids = self.tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
            out.append(Completion(tuple(ids), (), text, "stop"))
        return out


def _specs(n: int) -> list[EpisodeSpec]:
    task = load_task_package(TASK)
    return [EpisodeSpec(task, None, repeat=i) for i in range(n)]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _assert_nothing_left(boxes: list[Sandbox], config: SandboxConfig, n: int) -> None:
    assert len(boxes) == n, f"expected {n} sandboxes started, saw {len(boxes)}"
    for box in boxes:
        if box.backend == "bwrap":
            assert not box.dir.exists() and not box.meta_file.exists(), box.session_id
            assert box.session_id not in cgroup_names(), f"cgroup of {box.session_id} left"
            assert _processes_mentioning(str(box.dir)) == [], f"processes of {box.session_id} left"
        else:
            from skillgate_core.envs.docker_images import docker_client

            client = docker_client()
            left = client.containers.list(all=True, filters={"label": f"org.skillgate.session={box.session_id}"})
            assert left == [], f"containers of {box.session_id} left: {left}"
            assert client.api.volumes(filters={"name": box.volume}).get("Volumes") in (None, []), box.volume
    assert list(Path(config.sessions_path()).iterdir()) == [], "bubblewrap session files left"


def test_a_policy_error_mid_batch_releases_every_sandbox(sandbox_backend, tokenizer, sandbox_config, started):
    policy = ScriptedPolicy(tokenizer, ["echo one > a.txt", "echo two > b.txt", "ls"], fail_on=2)
    with pytest.raises(RuntimeError, match="policy failed"):
        run_episodes(_specs(3), policy, tokenizer, EpisodeConfig(backend=sandbox_backend, max_turns=4, workers=3),
                     sandbox_config=sandbox_config)
    assert policy.calls == 2  # turn 0 ran its commands in every sandbox, turn 1 raised
    _assert_nothing_left(started, sandbox_config, 3)


def test_ctrl_c_mid_batch_releases_every_sandbox(sandbox_backend, tokenizer, sandbox_config, started):
    policy = ScriptedPolicy(tokenizer, ["true", "true"], fail_on=2, error=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_episodes(_specs(2), policy, tokenizer, EpisodeConfig(backend=sandbox_backend, max_turns=4, workers=2),
                     sandbox_config=sandbox_config)
    _assert_nothing_left(started, sandbox_config, 2)


class _Interrupt(BaseException):
    """What no episode absorbs (as Ctrl-C): an Exception in one episode's turn ends that episode alone."""


def test_a_tool_error_releases_every_sandbox_without_waiting_for_the_others(
        sandbox_backend, tokenizer, sandbox_config, started, monkeypatch):
    real = ToolBox.run_all

    def run_all(self, calls, *, deadline=None):
        if any("boom" in json.dumps(c.arguments) for c in calls):
            time.sleep(0.5)  # let the other episode's command get going
            raise _Interrupt("tool failed")
        return real(self, calls, deadline=deadline)

    monkeypatch.setattr(ToolBox, "run_all", run_all)
    policy = ScriptedPolicy(tokenizer, ["sleep 60", "echo boom"])
    began = time.monotonic()
    with pytest.raises(_Interrupt, match="tool failed"):
        run_episodes(_specs(2), policy, tokenizer, EpisodeConfig(backend=sandbox_backend, max_turns=4, workers=2),
                     sandbox_config=sandbox_config)
    assert time.monotonic() - began < 40, "cleanup waited for the other episode's 60 s command"
    _assert_nothing_left(started, sandbox_config, 2)


def test_a_verifier_error_releases_every_sandbox(sandbox_backend, tokenizer, sandbox_config, started, monkeypatch):
    calls = []

    def verify(box, task, status):
        calls.append(box.session_id)
        raise RuntimeError("verifier failed")

    monkeypatch.setattr(episode, "verify", verify)
    policy = ScriptedPolicy(tokenizer, [None, None, None])  # every episode answers at once
    with pytest.raises(RuntimeError, match="verifier failed"):
        run_episodes(_specs(3), policy, tokenizer, EpisodeConfig(backend=sandbox_backend, max_turns=4, workers=3),
                     sandbox_config=sandbox_config)
    assert calls
    _assert_nothing_left(started, sandbox_config, 3)


class SlowPolicy(ScriptedPolicy):
    """ScriptedPolicy whose every call takes `seconds` (a GPU turn), recording when it ran."""

    def __init__(self, tokenizer, commands, seconds: float) -> None:
        super().__init__(tokenizer, commands)
        self.seconds, self.spans = seconds, []

    def act(self, views):
        start = time.monotonic()
        time.sleep(self.seconds)
        out = super().act(views)
        self.spans.append((start, time.monotonic()))
        return out


def test_lanes_overlap_tools_with_generation_one_act_at_a_time(bwrap_ready, tokenizer, sandbox_config, started,
                                                               monkeypatch):
    """run_episode_batches: batches in flight at once share the policy one call at a time, and one
    batch's tool calls run while another batch's turn is generated; results equal lockstep's."""
    from skillgate_core.agent.episode import SerializedPolicy, run_episode_batches

    tool_spans = []
    real = ToolBox.run_all

    def run_all(self, calls, *, deadline=None):
        start = time.monotonic()
        try:
            return real(self, calls, deadline=deadline)
        finally:
            tool_spans.append((start, time.monotonic()))

    monkeypatch.setattr(ToolBox, "run_all", run_all)
    task = load_task_package(TASK)
    batches = [[EpisodeSpec(task, None, repeat=i) for i in (0, 1)], [EpisodeSpec(task, None, repeat=i) for i in (0, 1)]]
    policy = SlowPolicy(tokenizer, ["sleep 0.3; echo one > a.txt", "sleep 0.3; echo two > b.txt"], seconds=0.3)
    config = EpisodeConfig(backend="bwrap", max_turns=2, workers=2)
    shared = SerializedPolicy(policy)
    results = run_episode_batches(batches, shared, tokenizer, config, sandbox_config=sandbox_config, lanes=2)
    shared.close()
    assert [len(r) for r in results] == [2, 2]
    assert [[t.status for t in r] for r in results] == [["truncated"] * 2] * 2
    assert [[t.response_ids for t in r] for r in results][0] == [[t.response_ids for t in r] for r in results][1]
    spans = sorted(shared.busy)
    assert len(spans) == policy.calls == 4
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), "two act calls at once"
    overlap = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in tool_spans for s2, e2 in spans)
    assert overlap > 0.1, f"no tool call ran while the other batch generated ({tool_spans}, {spans})"
    _assert_nothing_left(started, sandbox_config, 4)
    with pytest.raises(ValueError, match="lanes"):
        run_episode_batches(batches, policy, tokenizer, config, lanes=0)


def test_merged_turns_are_generated_together_and_split_back(bwrap_ready, tokenizer, sandbox_config, started):
    """merge=True: turns of lanes that queued while the policy was busy go out as one call; each lane
    gets its own episodes' turns back (results equal lockstep's)."""
    from skillgate_core.agent.episode import SerializedPolicy, run_episode_batches

    task = load_task_package(TASK)
    batches = [[EpisodeSpec(task, None, repeat=i) for i in (0, 1)] for _ in range(3)]
    policy = SlowPolicy(tokenizer, ["echo one > a.txt", "echo two > b.txt"], seconds=1.0)
    shared = SerializedPolicy(policy, merge=True)
    config = EpisodeConfig(backend="bwrap", max_turns=2, workers=2)
    results = run_episode_batches(batches, shared, tokenizer, config, sandbox_config=sandbox_config, lanes=3)
    shared.close()
    assert sum(shared.call_sizes) == 3 * 2 * 2 and max(shared.call_sizes) > 2, shared.call_sizes
    assert len(shared.call_sizes) == policy.calls < 6
    alone = run_episodes(batches[0], ScriptedPolicy(tokenizer, policy.commands), tokenizer, config,
                         sandbox_config=sandbox_config)
    for batch in results:
        assert [t.response_ids for t in batch] == [t.response_ids for t in alone]
    _assert_nothing_left(started, sandbox_config, 8)


def test_a_lane_error_is_raised_and_every_lane_releases_its_sandboxes(bwrap_ready, tokenizer, sandbox_config, started):
    from skillgate_core.agent.episode import run_episode_batches

    task = load_task_package(TASK)
    policy = ScriptedPolicy(tokenizer, ["true", "true"], fail_on=3)
    with pytest.raises(RuntimeError, match="policy failed"):
        run_episode_batches([[EpisodeSpec(task, None, repeat=0)], [EpisodeSpec(task, None, repeat=1)]], policy,
                            tokenizer, EpisodeConfig(backend="bwrap", max_turns=4, workers=1),
                            sandbox_config=sandbox_config, lanes=2)
    _assert_nothing_left(started, sandbox_config, 2)


def test_sandboxes_start_during_the_first_turn_and_an_ended_episode_is_graded_while_others_play(
        bwrap_ready, tokenizer, sandbox_config, started, monkeypatch):
    """EpisodeConfig.overlap_sandbox (the default): the sandboxes start while the first turn is generated and
    an episode that answered is graded while the others' next turn generates; every turn, status, score and
    opened skill is what the lockstep loop (overlap_sandbox=False) gives, and nothing is left running."""
    spans: dict[str, list[tuple[float, float]]] = {"start": [], "verify": []}
    real_start, real_verify = episode.start_sandbox, episode.verify

    def timed(kind, fn):
        def wrapper(*args, **kwargs):
            t0 = time.monotonic()
            time.sleep(0.1)  # a slower start and verifier (Docker's, a loaded machine's): overlap beyond doubt
            try:
                return fn(*args, **kwargs)
            finally:
                spans[kind].append((t0, time.monotonic()))
        return wrapper

    monkeypatch.setattr(episode, "start_sandbox", timed("start", real_start))
    monkeypatch.setattr(episode, "verify", timed("verify", real_verify))
    commands = [None, "echo one > a.txt", "sleep 0.2; echo two > b.txt"]  # episode 0 answers at its first turn
    runs = {}
    for overlap in (False, True):
        for kind in spans:
            spans[kind].clear()
        policy = SlowPolicy(tokenizer, commands, seconds=0.4)
        phases: dict[str, float] = {}
        runs[overlap] = run_episodes(_specs(3), policy, tokenizer,
                                     EpisodeConfig(backend="bwrap", max_turns=3, workers=3, overlap_sandbox=overlap),
                                     sandbox_config=sandbox_config, phase_seconds=phases)
        assert set(phases) == {"start", "tools", "verify"} and policy.calls == 3, (phases, policy.calls)
        acts = policy.spans

        def during(kind, act, spans=spans):
            return sum(max(0.0, min(e, act[1]) - max(s, act[0])) for s, e in spans[kind])

        if overlap:
            assert during("start", acts[0]) > 0.05, (spans["start"], acts)
            assert during("verify", acts[1]) > 0.05, ("episode 0 was not graded during turn 2", spans["verify"], acts)
        else:
            assert all(e <= acts[0][0] for _, e in spans["start"]), (spans["start"], acts)
            assert all(s >= acts[-1][1] for s, _ in spans["verify"]), (spans["verify"], acts)
    fields = ("response_ids", "loss_mask", "turns", "status", "score", "raw_score", "verifier_detail", "skill_opens")
    assert [[getattr(t, f) for f in fields] for t in runs[True]] == [[getattr(t, f) for f in fields] for t in runs[False]]
    assert [t.status for t in runs[True]] == ["completed", "truncated", "truncated"]
    _assert_nothing_left(started, sandbox_config, 6)

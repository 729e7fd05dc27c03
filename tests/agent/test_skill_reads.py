"""What counts as a skill read (docs/reads.md), through the real episode loop on both sandbox backends.

A read is a SKILL.md / README.md the sandbox's processes opened, whatever the command looked like;
it is attributed (an action with identity tokens) only when the call that opened it names the skill
as a `/skills/NAME` path. Each episode below is one command shape a policy writes naturally; the
group of them then goes through span detection, the clean-oracle utility and the eval trial row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.sandbox_fixtures import REPO
from support.scripted_policy import Call, ScriptedPolicy, tiny_tokenizer

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes
from skillgate_core.agent.trajectory import Trajectory, span_report, trajectory_span_report
from skillgate_core.credit import selector_advantages
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.trials import reads_of
from skillgate_core.formats.slate_manifest import SlateEntry
from skillgate_core.skills import Slate

TASK = REPO / "tests" / "envs" / "tasks" / "good" / "hello-file"
ORACLE = "oracle-x"
NAMES = [ORACLE, *(f"misl-{i}" for i in range(5)), *(f"rel-{i}" for i in range(5)), *(f"irr-{i}" for i in range(5))]
CATEGORY = {n: "oracle" if n == ORACLE else {"m": "misleading", "r": "relevant", "i": "irrelevant"}[n[0]] for n in NAMES}

EPISODES: list[list[list[Call]]] = [
    # 0: a relative path after `cd /skills` is an (unattributed) read; the later explicit read is then not clean
    [[("exec", {"command": f"cd /skills && cat {ORACLE}/SKILL.md"})],
     [("exec", {"command": f"cat /skills/{ORACLE}/SKILL.md"})]],
    # 1: a read after a newline in one exec command is an attributed read (JSON writes the newline as \n)
    [[("exec", {"command": f"cd /app\ncat /skills/{ORACLE}/SKILL.md"})]],
    # 2: a glob reads all 16, none attributed, no mismatch
    [[("exec", {"command": "cat /skills/*/SKILL.md"})]],
    # 3: running a skill's own script is use, not a read, and no mismatch
    [[("exec", {"command": "python3 /skills/misl-0/scripts/run.py"})]],
    # 4: listing is not opening
    [[("exec", {"command": f"ls /skills && ls -l /skills/{ORACLE} && find /skills -name SKILL.md"})]],
    # 5: the read tool naming a skill is an attributed read; grep -r opens every SKILL.md (unattributed)
    [[("read", {"path": "/skills/rel-0/SKILL.md"})], [("exec", {"command": "grep -rl nothing-here /skills; true"})]],
]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def skills(tmp_path_factory) -> tuple[Slate, Path]:
    root = tmp_path_factory.mktemp("slate-skills")
    for name in NAMES:
        (root / name / "scripts").mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name}.\n---\n# Steps\n\nDo {name}.\n")
        (root / name / "scripts" / "run.py").write_text("print('used')\n")
    entries = tuple(SlateEntry(n, CATEGORY[n], f"What {n} does.") for n in NAMES)  # type: ignore[arg-type]
    return Slate("hello-file", "test", "train", 0, entries), root


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def played(request: pytest.FixtureRequest, tokenizer, skills) -> list[Trajectory]:
    """The episodes, played once per sandbox backend for both tests below (they only read them)."""
    sandbox_backend = request.param
    request.getfixturevalue(f"{sandbox_backend}_ready")
    slate, folder = skills
    task = load_task_package(TASK)
    specs = [EpisodeSpec(task, slate, folder, repeat=i) for i in range(len(EPISODES))]
    trajectories = run_episodes(specs, ScriptedPolicy(tokenizer, EPISODES), tokenizer,
                                EpisodeConfig(max_turns=4, backend=sandbox_backend, workers=3))
    for t in trajectories:
        assert t.status == "completed", (t.repeat, t.verifier_detail)
    return trajectories


def test_reads_are_what_the_sandbox_opened_whatever_the_command(played, tokenizer):
    spans = [span_report(t, tokenizer) for t in played]
    assert [s["span_mismatch"] for s in spans] == [0] * len(EPISODES)
    assert spans[0]["reads"] == ["oracle", "oracle"]  # cd /skills && cat oracle-x/SKILL.md, then by name
    assert spans[1]["reads"] == ["oracle"]
    assert sorted(spans[2]["reads"]) == sorted(CATEGORY.values()) and len(spans[2]["reads"]) == 16
    assert spans[3]["reads"] == [] and spans[4]["reads"] == []
    assert spans[5]["reads"][0] == "relevant" and len(spans[5]["reads"]) == 17
    # Eval rows read the same set, with names.
    assert reads_of(played[1]) == (["oracle"], [ORACLE])
    assert sorted(reads_of(played[2])[1]) == sorted(NAMES)
    assert reads_of(played[3]) == ([], []) and reads_of(played[4]) == ([], [])


def test_only_named_reads_are_actions_and_an_unattributed_read_is_not_clean(played, tokenizer):
    reports = [trajectory_span_report(t, tokenizer) for t in played]
    # Actions: the explicit read of episode 0 (turn 1), the newline exec of 1, the read tool of 5.
    assert [[(a.skill_name, a.turn_index, a.tool_name) for a in r.actions] for r in reports] == [
        [(ORACLE, 1, "exec")], [(ORACLE, 0, "exec")], [], [], [], [("rel-0", 0, "read")]]
    assert reports[0].attributed() == [False, True] and reports[2].attributed() == [False] * 16
    for r, t in zip(reports, played, strict=True):
        for a in r.actions:
            assert a.skill_name in tokenizer.decode([t.response_ids[i] for i in a.identity_token_indices])
    # The trajectory records each open with the call that ran it.
    assert [(o.skill_name, o.turn_index, o.call_index) for o in played[0].skill_opens or ()] == [
        (ORACLE, 0, 0), (ORACLE, 1, 0)]
    assert json.loads(played[1].to_row()["skill_opens"]) == [
        {"skill_name": ORACLE, "turn_index": 0, "call_index": 0}]
    # Clean oracle: only episode 1 is clean; episode 0's named oracle read is pushed down like any unclean read.
    adv = selector_advantages([r.reads() for r in reports], "clean_oracle", [r.attributed() for r in reports])
    per_action = [r.action_values(a) for r, a in zip(reports, adv, strict=True)]
    assert per_action[1][0] > 0 and per_action[0][0] < 0 and per_action[5][0] < 0

"""Consulting a skill (docs/reads.md): opening or running ANY file of another skill's folder, through the real
episode loop on both sandbox backends, then span detection, the training credit and the eval trial rows.

The attack: the bench's scripts differ exactly where the skills differ, so a policy can inspect every skill
(`head -c 400 /skills/*/scripts/*.py`, or each script's `--help`), then read only the right SKILL.md, and
collect the clean-oracle credit of an honest single read. Reading is opening a SKILL.md / README.md; any
other file of the skill opened or executed, by any process, is consultation: an episode that consulted a
skill other than the oracle it read is not clean, in training credit and in the eval's clean-oracle rate.
Running the read skill's own scripts, as its procedure says (several times), stays clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sandbox_fixtures import REPO
from support.scripted_policy import Call, ScriptedPolicy, tiny_tokenizer

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes
from skillgate_core.agent.trajectory import Trajectory, span_report, trajectory_span_report
from skillgate_core.credit import selector_advantages
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.metrics import Trial, summarize_trials
from skillgate_core.evaluation.trials import TrialContext, trial_row
from skillgate_core.formats.slate_manifest import SlateEntry
from skillgate_core.skills import Slate

TASK = REPO / "tests" / "envs" / "tasks" / "good" / "hello-file"
ORACLE = "oracle-x"
NAMES = [ORACLE, *(f"misl-{i}" for i in range(5)), *(f"rel-{i}" for i in range(5)), *(f"irr-{i}" for i in range(5))]
CATEGORY = {n: "oracle" if n == ORACLE else {"m": "misleading", "r": "relevant", "i": "irrelevant"}[n[0]] for n in NAMES}
READ_ORACLE: Call = ("exec", {"command": f"cat /skills/{ORACLE}/SKILL.md"})

EPISODES: list[list[list[Call]]] = [
    # 0: every skill's script inspected through a glob, then one explicit read of the oracle
    [[("exec", {"command": "head -c 400 /skills/*/scripts/*.py"})], [READ_ORACLE]],
    # 1: another skill's script run with --help (the kernel executes it, python opens it), then the oracle read
    [[("exec", {"command": "/skills/misl-0/scripts/tool.py --help"})], [READ_ORACLE]],
    # 2: the honest route: read the oracle, then run its own script twice (a procedure of two script steps)
    [[READ_ORACLE], [("exec", {"command": f"/skills/{ORACLE}/scripts/tool.py"})],
     [("exec", {"command": f"python3 /skills/{ORACLE}/scripts/tool.py --step 2"})]],
    # 3: a plain misleading read (u = 0), so the group's selector stream has something to compare with
    [[("exec", {"command": "cat /skills/misl-1/SKILL.md"})]],
    # 4: a child process reads another skill's data through a path the command never spells, then the oracle
    [[("exec", {"command": 'd=/skills; n=irr; sh -c "cat $d/$n-0/data/table.csv" >/dev/null'})], [READ_ORACLE]],
]
CONSULTED_BEYOND = {0, 1, 4}
"""The episodes that consulted a skill they did not read (not clean, though each read only the oracle)."""


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def skills(tmp_path_factory) -> tuple[Slate, Path]:
    root = tmp_path_factory.mktemp("consult-skills")
    for name in NAMES:
        (root / name / "scripts").mkdir(parents=True)
        (root / name / "data").mkdir()
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name}.\n---\n# Steps\n\n"
                                              f"Run /skills/{name}/scripts/tool.py.\n")
        tool = root / name / "scripts" / "tool.py"
        tool.write_text(f"#!/usr/bin/env python3\n\"\"\"{name}: the decisive detail of this skill.\"\"\"\n"
                        "print(__doc__)\n")
        tool.chmod(0o755)
        (root / name / "data" / "table.csv").write_text(f"skill,{name}\n")
    entries = tuple(SlateEntry(n, CATEGORY[n], f"What {n} does.") for n in NAMES)  # type: ignore[arg-type]
    return Slate("hello-file", "test", "train", 0, entries), root


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def played(request: pytest.FixtureRequest, tokenizer, skills) -> list[Trajectory]:
    """The episodes, played once per sandbox backend for the tests below (they only read them)."""
    sandbox_backend = request.param
    request.getfixturevalue(f"{sandbox_backend}_ready")
    slate, folder = skills
    task = load_task_package(TASK)
    specs = [EpisodeSpec(task, slate, folder, repeat=i) for i in range(len(EPISODES))]
    trajectories = run_episodes(specs, ScriptedPolicy(tokenizer, EPISODES), tokenizer,
                                EpisodeConfig(max_turns=5, backend=sandbox_backend, workers=3))
    for t in trajectories:
        assert t.status == "completed", (t.repeat, t.verifier_detail)
    assert "the decisive detail" in trajectories[1].messages[3]["content"]  # the --help run did run the script
    return trajectories


def test_consultation_is_what_the_sandbox_opened_or_ran(played, tokenizer):
    reports = [trajectory_span_report(t, tokenizer) for t in played]
    # Reads are unchanged: only SKILL.md opens; every episode but 3 read only the oracle, by name.
    assert [r.reads() for r in reports] == [["oracle"], ["oracle"], ["oracle"], ["misleading"], ["oracle"]]
    assert [r.attributed() for r in reports] == [[True]] * 5
    assert [r.span_mismatch for r in reports] == [0] * 5
    consulted = [set(r.consulted_names()) for r in reports]
    assert consulted == [set(NAMES), {"misl-0", ORACLE}, {ORACLE}, {"misl-1"}, {"irr-0", ORACLE}]
    # The trajectory records each consultation with the call that ran it.
    assert [(o.skill_name, o.turn_index, o.call_index) for o in played[2].skill_consults or ()] == [
        (ORACLE, 0, 0), (ORACLE, 1, 0), (ORACLE, 2, 0)]
    assert [(o.skill_name, o.turn_index) for o in played[4].skill_consults or ()] == [("irr-0", 0), (ORACLE, 1)]
    assert [c["skill_name"] for c in span_report(played[1], tokenizer)["consulted"]] == ["misl-0", ORACLE]


def test_consulting_another_skill_earns_no_clean_oracle_credit(played, tokenizer):
    from skillgate_core.credit import action_selector_advantages  # what the GRPO step puts on identity tokens

    reports = [trajectory_span_report(t, tokenizer) for t in played]
    assert [r.clean_oracle for r in reports] == [False, False, True, False, False]
    # Training credit: the selector advantage of each action (what reaches the identity tokens).
    per_action = action_selector_advantages(reports, "clean_oracle")
    assert per_action[2][0] > 0, per_action  # the honest read, its own scripts run twice: credited
    for i in (*CONSULTED_BEYOND, 3):
        assert per_action[i][0] < 0, (i, per_action)  # inspect-then-read is pushed down like any unclean read
    # ... and the honest episode is credited exactly as before consultation was observed: its own scripts
    # change nothing (a group of the honest episode and the misleading read, with and without consultation).
    honest = [reports[2], reports[3]]
    before = selector_advantages([r.reads() for r in honest], "clean_oracle", [r.attributed() for r in honest])
    assert action_selector_advantages(honest, "clean_oracle") == [r.action_values(a) for r, a in
                                                                   zip(honest, before, strict=True)]
    # first_oracle (the non-clean ablation) does not ask for cleanliness: consultation changes nothing there
    assert [a[0] for a in action_selector_advantages(reports, "first_oracle")] == pytest.approx([0.2, 0.2, 0.2, -0.8, 0.2])


def test_eval_rows_and_metrics_show_consultation(played):
    context = TrialContext("p", "f" * 64, "scripted", "exp", "export", "scripted", 0)
    rows = [trial_row(t, context) for t in played]
    assert [r["read_names"] for r in rows] == [[ORACLE], [ORACLE], [ORACLE], ["misl-1"], [ORACLE]]
    trials = [Trial.from_row(r) for r in rows]
    assert [t.clean_oracle for t in trials] == [False, False, True, False, False]
    assert summarize_trials(trials, ks=(1,))["clean_oracle_rate"] == pytest.approx(1 / 5)
    assert [set(r["consulted_names"]) for r in rows] == [set(NAMES), {"misl-0", ORACLE}, {ORACLE}, {"misl-1"},
                                                         {"irr-0", ORACLE}]
    assert [sorted(t.consulted_beyond_read) for t in trials] == [
        sorted(set(NAMES) - {ORACLE}), ["misl-0"], [], [], ["irr-0"]]
    summary = summarize_trials(trials, ks=(1,))
    assert summary["clean_oracle_rate"] == pytest.approx(1 / 5)
    assert summary["consulted_skills_per_trial"] == pytest.approx((16 + 2 + 1 + 1 + 2) / 5)
    assert summary["consulted_beyond_read_rate"] == pytest.approx(3 / 5)
    assert summary["oracle_exposure"] == pytest.approx(4 / 5)  # the read metrics themselves are unchanged

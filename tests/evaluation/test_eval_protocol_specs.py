"""Protocol spec files made concrete on a bench: identity, fingerprint inputs, refusals (docs/method.md 8)."""

from __future__ import annotations

import json
import re

import pytest

from skillgate_core.evaluation.protocol import (
    EvalProtocol,
    ProtocolConflictError,
    check_pinned_id,
    register_protocol,
)
from skillgate_core.evaluation.specs import build_protocol, list_specs, load_spec


def test_shipped_specs_give_fingerprinted_protocols_over_what_the_bench_holds(bench):
    assert {"eval70_v1", "slate147"} <= set(list_specs())
    eval70 = build_protocol(load_spec("eval70_v1"), bench)
    p = eval70.protocol
    assert re.fullmatch(r"eval70_v1__mixed__r4__[0-9a-f]{10}", p.protocol_id())
    assert p.protocol_id().endswith(p.fingerprint()[:10]) and len(p.fingerprint()) == 64
    assert (p.repeats, p.tasks, p.max_turns, p.split) == (4, 4, 30, "eval70_v1")
    assert eval70.trial_count() == 16
    assert "holds 4 of the 70 eval70_v1 tasks" in eval70.note()
    assert all(t.slate is not None and len(t.slate.entries) == 16 for t in eval70.tasks)
    assert len(eval70.skill_names) >= 16
    slate = build_protocol(load_spec("slate147"), bench)
    assert slate.protocol.protocol_id().startswith("slate147__mixed__r4__") and slate.protocol.tasks == 4
    assert "4 of the 147 slate147 tasks" in slate.note()
    assert {t.task_id for t in slate.tasks}.isdisjoint({t.task_id for t in eval70.tasks})
    # the same spec on the same bench is the same protocol
    assert build_protocol(load_spec("eval70_v1"), bench).protocol == p


def test_fingerprint_covers_tasks_skills_manifests_settings_and_repeats(bench_copy, tiny_spec, tmp_path):
    spec = load_spec(tiny_spec)
    base = build_protocol(spec, bench_copy).protocol
    fp = base.fingerprint()
    # the demo override of the repeats: explicit, recorded, another protocol
    demo = build_protocol(spec, bench_copy, demo_repeats=1)
    assert demo.demo == {"repeats": 1} and demo.protocol.protocol_id().startswith("tiny_v1__mixed__r1__")
    assert demo.protocol.fingerprint() != fp and "demo override repeats=1" in demo.note()
    assert build_protocol(spec, bench_copy, demo_repeats=2).demo == {}  # the spec's own value is no override
    # a spec setting
    seeded = tmp_path / "seeded.toml"
    seeded.write_text(tiny_spec.read_text().replace("seed = 3", "seed = 4"))
    assert build_protocol(load_spec(seeded), bench_copy).protocol.fingerprint() != fp
    # a task package file (same ids, other content)
    resolved = build_protocol(spec, bench_copy)
    instruction = resolved.tasks[0].path / "instruction.md"
    instruction.write_text(instruction.read_text() + "\n")
    changed_task = build_protocol(spec, bench_copy).protocol
    assert changed_task.task_list_sha256 != base.task_list_sha256 and changed_task.fingerprint() != fp
    # a skill file a slate shows
    skill = bench_copy / "skills" / resolved.skill_names[0] / "SKILL.md"
    skill.write_text(skill.read_text() + "\n")
    changed_skill = build_protocol(spec, bench_copy).protocol
    assert changed_skill.snapshot_digest != changed_task.snapshot_digest
    # the skill mode changes what is shown: no slate, no snapshot
    none_spec = tmp_path / "none.toml"
    none_spec.write_text(tiny_spec.read_text().replace('split = "eval70_v1"', 'split = "eval70_v1"\nskill_mode = "none"'))
    bare = build_protocol(load_spec(none_spec), bench_copy)
    assert bare.skill_names == () and all(t.slate is None for t in bare.tasks)
    assert bare.protocol.protocol_id().startswith("tiny_v1__none__r2__")


def test_reusing_an_id_with_another_fingerprint_aborts_naming_both(bench, tiny_spec, tmp_path):
    protocol = build_protocol(load_spec(tiny_spec), bench).protocol
    path = register_protocol(protocol, tmp_path)
    assert register_protocol(protocol, tmp_path) == path  # same body: fine
    forged = json.loads(path.read_text())
    forged["fingerprint"], forged["seed"] = "f" * 64, 99
    path.write_text(json.dumps(forged))
    with pytest.raises(ProtocolConflictError) as err:
        register_protocol(protocol, tmp_path)
    assert "f" * 64 in str(err.value) and protocol.fingerprint() in str(err.value)
    # a pinned id (e.g. the one earlier rows carry) that this bench no longer gives
    check_pinned_id(protocol, protocol.protocol_id())
    other = EvalProtocol.from_body({**protocol.body(), "seed": 4}, "test")
    with pytest.raises(ProtocolConflictError) as err:
        check_pinned_id(other, protocol.protocol_id())
    assert protocol.fingerprint()[:10] in str(err.value) and other.fingerprint() in str(err.value)


def test_a_spec_file_is_checked_like_a_config(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[protocol]\nspec_id = "x"\nsplit = "eval70_v1"\nrepeats = 0\n')
    with pytest.raises(ValueError, match="repeats"):
        load_spec(bad)
    bad.write_text('[protocol]\nspec_id = "x"\nsplit = "eval70_v1"\nprompt_profile = "nope"\n')
    with pytest.raises(ValueError, match="unknown prompt profile"):
        load_spec(bad)
    with pytest.raises(ValueError, match="no protocol spec 'nope'"):
        load_spec("nope")


def test_the_stepped_protocol_refuses_a_bench_without_steps_and_fingerprints_each_k(bench, tmp_path):
    from skillgate_core.benchgen import BenchBuildConfig, build_suite

    spec = load_spec("eval70_stepped_v1")
    assert spec.stepped and spec.context_size == 8192
    with pytest.raises(ValueError, match=r"eval70_stepped_v1: needs a bench with stepped procedures .* "
                                         r"procedure_steps 0"):
        build_protocol(spec, bench)
    ids = set()
    for k in (1, 3):
        stepped = tmp_path / f"k{k}"
        build_suite(BenchBuildConfig(seed=5, domains=("scheduling",), train_skills_per_cell=1,
                                     train_tasks_per_skill=1, eval_tasks=2, slate_tasks=0, procedure_steps=k), stepped)
        resolved = build_protocol(spec, stepped)
        assert resolved.protocol.tasks == 2 and resolved.protocol.context_size == 8192
        ids.add(resolved.protocol.protocol_id())
    assert len(ids) == 2 and all(i.startswith("eval70_stepped_v1__mixed__r4__") for i in ids)


@pytest.mark.parametrize("shape", ["skill-folder", "skills-dir", "task-folder"])
def test_a_bench_reaching_host_folders_through_a_link_is_refused(bench_copy, shape, tmp_path):
    """A bench whose skills/NAME, skills/ or a task folder is a link to a host folder (which holds what the
    link's name expects, plus a secret): the protocol names the link, and the evaluation's snapshot of
    the bench's skills (snapshot_skills(..., below=bench)) refuses it too; nothing of the host is copied."""
    import shutil

    from skillgate_core.base.plain_trees import NotPlainTree
    from skillgate_core.envs.bench_index import load_bench_rows
    from skillgate_core.skills import SnapshotError, read_slate, snapshot_skills

    row = load_bench_rows(bench_copy, "eval70_v1")[0]
    name = read_slate(bench_copy / row["path"] / "skills.json").oracle
    host = tmp_path / "host"
    moved = {"skill-folder": bench_copy / "skills" / name, "skills-dir": bench_copy / "skills",
             "task-folder": bench_copy / row["path"]}[shape]
    shutil.move(moved, host)
    (host / "secret.txt").write_text("host secret\n")
    moved.symlink_to(host, target_is_directory=True)
    with pytest.raises(NotPlainTree) as err:
        build_protocol(load_spec("eval70_v1"), bench_copy)
    assert str(err.value).startswith(f"{moved}: symbolic link to {host}"), err.value
    if shape != "task-folder":
        snaps = tmp_path / "snaps"
        with pytest.raises(SnapshotError, match=f"{moved}: symbolic link to "):
            snapshot_skills([bench_copy / "skills" / name], root=snaps, below=bench_copy)
        assert not [p for p in snaps.rglob("secret.txt")]

"""Stage rl-data-prep on a real bench and a real tiny policy: deterministic bytes, prompts that decode to
the rendered chat, the variants each profile needs, and clear errors that name the task."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from skillgate_core.agent.prompts import DEFAULT_PROFILE, build_messages
from skillgate_core.base.paths import state_layout
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.pipeline.run import run_stage
from skillgate_core.rl.data_prep import RLDataError, RLDataPrepConfig, prepare_rl_data, rl_data_schema
from skillgate_core.skills import read_slate, snapshot_skills


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


POLARS_SCHEMA = {
    "task_id": pl.String, "task_path": pl.String, "family": pl.String, "domain": pl.String,
    "bench": pl.String, "slate_seed": pl.Int64, "gold_name": pl.String,
    "slate": pl.List(pl.Struct({"name": pl.String, "category": pl.String})),
    "skills_snapshot_digest": pl.String, "task_digest": pl.String, "profile": pl.String,
    "variants": pl.List(pl.String),
    "prompt_ids": pl.List(pl.Int32), "prompt_len": pl.Int32,
    "no_skill_prompt_ids": pl.List(pl.Int32), "no_skill_prompt_len": pl.Int32,
    "prompt_profile": pl.String, "prompt_profile_digest": pl.String, "tool_schema_digest": pl.String,
    "tokenizer_digest": pl.String, "max_prompt_tokens": pl.Int32, "skill_aliases": pl.String,
    "selection_cue": pl.String,
}
"""What a polars reader sees: the dtypes of the polars writer the table had before it was written with pyarrow."""


def prep(bench: Path, policy: Path, out: Path, **config) -> Path:
    return prepare_rl_data(RLDataPrepConfig(**config), {"bench": bench, "sft_model": policy}, out).outputs["rl_data"]


def test_same_inputs_give_a_byte_identical_parquet(bench, policy, tmp_path):
    a = prep(bench, policy, tmp_path / "a", profile="hybrid_slate")
    b = prep(bench, policy, tmp_path / "b", profile="hybrid_slate")
    assert a.name == "rl_train.parquet" and sha(a) == sha(b)
    assert sha(prep(bench, policy, tmp_path / "c", profile="mixed_task_reward")) != sha(a)


def test_the_table_is_the_same_bytes_without_polars(bench, policy, tmp_path):
    # The GPU machine has no polars: the stage writes with pyarrow alone, and the file (hence the
    # stage's output digest, which keys every later stage) is the same there as here.
    from support.gpu_machine import run_without_absent

    here = prep(bench, policy, tmp_path / "here", profile="selector_clean_oracle_action_credit")
    code = ("from pathlib import Path\n"
            "from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data\n"
            f"prepare_rl_data(RLDataPrepConfig(profile='selector_clean_oracle_action_credit'), "
            f"{{'bench': Path({str(bench)!r}), 'sft_model': Path({str(policy)!r})}}, Path({str(tmp_path / 'gpu')!r}))\n")
    result = run_without_absent(code, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sha(tmp_path / "gpu" / "rl_train.parquet") == sha(here)


def test_rows_freeze_the_slate_and_prompts_decode_to_the_rendered_chat(bench, policy, tmp_path):
    from transformers import AutoTokenizer

    path = prep(bench, policy, tmp_path, profile="hybrid_slate")
    df = pl.read_parquet(path)
    assert pq.read_schema(path).remove_metadata().equals(rl_data_schema())
    assert dict(df.schema) == POLARS_SCHEMA
    index = [json.loads(line) for line in (bench / "tasks.jsonl").read_text().splitlines()]
    train = sorted(r["task_id"] for r in index if r["split"] == "train")
    assert df["task_id"].to_list() == train and df.height == 16
    tok = AutoTokenizer.from_pretrained(policy)
    for row in df.head(3).iter_rows(named=True):
        folder = bench / row["task_path"]
        slate = read_slate(folder / "skills.json")
        # The frozen order and categories are skills.json's, never recomputed.
        assert [(s["name"], s["category"]) for s in row["slate"]] == [(e.name, e.category) for e in slate.entries]
        assert row["gold_name"] == slate.oracle and row["slate_seed"] == slate.seed
        # The snapshot digest is what freezing exactly these 16 skill folders gives.
        snap = snapshot_skills([bench / "skills" / n for n in slate.names], root=tmp_path / "snaps")
        assert row["skills_snapshot_digest"] == snap.digest
        instruction = load_task_package(folder).instruction
        for ids, with_slate in ((row["prompt_ids"], slate), (row["no_skill_prompt_ids"], None)):
            rendered = tok.apply_chat_template(build_messages(DEFAULT_PROFILE, instruction, with_slate),
                                               tokenize=False, add_generation_prompt=True)
            assert tok.decode(ids) == rendered and rendered.endswith("<|im_start|>assistant\n")
        assert row["prompt_len"] == len(row["prompt_ids"]) and row["no_skill_prompt_len"] == len(row["no_skill_prompt_ids"])
        assert "<available_skills>" in tok.decode(row["prompt_ids"])
        assert "<available_skills>" not in tok.decode(row["no_skill_prompt_ids"])
        assert row["prompt_profile"] == DEFAULT_PROFILE.name and row["prompt_profile_digest"] == DEFAULT_PROFILE.digest()


@pytest.mark.parametrize("profile, variants", [
    ("no_skill", ["no_skill"]),
    ("mixed_task_reward", ["slate"]),
    ("selector_clean_oracle_action_credit", ["slate"]),
    ("hybrid_slate", ["slate", "no_skill"]),
])
def test_each_profile_gets_the_variants_it_needs(bench, policy, tmp_path, profile, variants):
    df = pl.read_parquet(prep(bench, policy, tmp_path, profile=profile, max_tasks=4))
    assert df.height == 4 and set(df["profile"]) == {profile}
    assert all(v == variants for v in df["variants"].to_list())
    assert df["prompt_ids"].null_count() == (0 if "slate" in variants else 4)
    assert df["no_skill_prompt_ids"].null_count() == (0 if "no_skill" in variants else 4)


def test_stage_is_registered_and_reports_metrics(bench, policy, skillgate_home):
    record = run_stage("rl-data-prep", RLDataPrepConfig(profile="hybrid_slate"),
                       {"bench": bench, "sft_model": policy}, state_layout())
    path = Path(record.outputs["rl_data"])
    assert record.output_digests["rl_data"] == sha(path)
    m = record.metrics
    assert m["tasks"] == 16 and m["families"] == {"constraints": 4, "diagnosis": 4, "planning": 4, "procedural": 4}
    assert m["max_prompt_tokens"] == 8192 - 2048
    assert m["no_skill_prompt_len"]["max"] < m["prompt_len"]["min"] <= m["prompt_len"]["mean"] <= m["prompt_len"]["max"]


def _copy(bench: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(bench, tmp_path / "bench"))


def _first_train_task(bench: Path) -> dict:
    return next(json.loads(x) for x in sorted((bench / "tasks.jsonl").read_text().splitlines())
                if json.loads(x)["split"] == "train")


def test_a_malformed_slate_is_an_error_naming_the_task(bench, policy, tmp_path):
    copy = _copy(bench, tmp_path)
    rows = sorted((json.loads(x) for x in (copy / "tasks.jsonl").read_text().splitlines()
                   if json.loads(x)["split"] == "train"), key=lambda r: r["task_id"])
    victim = rows[2]
    manifest = copy / victim["path"] / "skills.json"
    data = json.loads(manifest.read_text())
    six_oracles = [{**e, "category": "oracle"} if e["category"] == "misleading" else e for e in data["entries"]]
    manifest.write_text(json.dumps({**data, "entries": six_oracles}))
    with pytest.raises(RLDataError, match=rf"task {victim['task_id']}: malformed slate: .*exactly one entry "
                                          r"with category 'oracle'.*found 6"):
        prep(copy, policy, tmp_path / "out")
    oracle_only = [e for e in data["entries"] if e["category"] == "oracle"]
    manifest.write_text(json.dumps({**data, "entries": oracle_only}))  # well-formed, but 1 skill instead of 16
    with pytest.raises(RLDataError, match=rf"task {victim['task_id']}: malformed slate: .*slate has 1 skills"):
        prep(copy, policy, tmp_path / "out")
    manifest.unlink()
    with pytest.raises(RLDataError, match=rf"task {victim['task_id']}: malformed slate: .*skills.json: missing"):
        prep(copy, policy, tmp_path / "out")
    assert not (tmp_path / "out" / "rl_train.parquet").exists()


def test_a_slate_of_another_task_or_a_missing_skill_is_refused(bench, policy, tmp_path):
    copy = _copy(bench, tmp_path)
    first = _first_train_task(copy)
    manifest = copy / first["path"] / "skills.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "task_id": "someone-else"}))
    with pytest.raises(RLDataError, match=rf"task {first['task_id']}: its skills.json is the slate of task 'someone-else'"):
        prep(copy, policy, tmp_path / "out")
    manifest.write_text(json.dumps({**data, "split": "eval"}))
    with pytest.raises(RLDataError, match=rf"task {first['task_id']}: its slate was ordered with the 'eval' shuffle tag"):
        prep(copy, policy, tmp_path / "out")
    manifest.write_text(json.dumps(data))
    shutil.rmtree(copy / "skills" / data["entries"][3]["name"])
    with pytest.raises(RLDataError, match=rf"task {first['task_id']}: slate skill '{data['entries'][3]['name']}'"):
        prep(copy, policy, tmp_path / "out")


def test_an_over_long_prompt_is_an_error_naming_the_task(bench, policy, tmp_path):
    first = _first_train_task(bench)["task_id"]
    with pytest.raises(RLDataError, match=rf"task {first}: the slate prompt has \d+ tokens, over max_prompt_tokens=1000"):
        prep(bench, policy, tmp_path / "a", max_prompt_tokens=1000)
    # The default limit comes from the model: max_position_embeddings (8192) minus the response budget.
    with pytest.raises(RLDataError, match=rf"task {first}: the no_skill prompt has \d+ tokens, over max_prompt_tokens=192"):
        prep(bench, policy, tmp_path / "b", profile="no_skill", response_budget_tokens=8000)


def test_missing_inputs_are_clear(bench, policy, tmp_path):
    with pytest.raises(FileNotFoundError, match="tasks.jsonl: missing"):
        prep(tmp_path / "nowhere", policy, tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="config.json: missing"):
        prep(bench, tmp_path, tmp_path / "b")
    held_out = tmp_path / "held-out"
    held_out.mkdir()
    (held_out / "tasks.jsonl").write_text("".join(
        line + "\n" for line in (bench / "tasks.jsonl").read_text().splitlines() if '"split": "train"' not in line))
    with pytest.raises(RLDataError, match="no task in split 'train'; splits present: eval70_v1, slate147"):
        prep(held_out, policy, tmp_path / "c")
    with pytest.raises(ValueError, match="unknown RL profile 'fast'"):
        RLDataPrepConfig(profile="fast")


def test_renamed_slates_are_rendered_mounted_and_played_under_fresh_names(bench, policy, tmp_path):
    from transformers import AutoTokenizer

    from skillgate_core.agent.policies import TeacherConfig, TeacherPolicy
    from skillgate_core.credit import RolloutStepFilter
    from skillgate_core.rl.grpo_config import GRPOConfig
    from skillgate_core.rl.profiles import get_profile
    from skillgate_core.rl.prompt_stream import PromptStream
    from skillgate_core.rl.rl_tasks import load_rl_tasks
    from skillgate_core.rl.rollouts import rollout_step
    from skillgate_core.skills import load_skill

    path = prep(bench, policy, tmp_path / "rl", renamed_rate=0.5, rename_seed=1)
    plain = {r["task_id"]: r for r in pl.read_parquet(prep(bench, policy, tmp_path / "plain")).iter_rows(named=True)}
    df = pl.read_parquet(path)
    assert 0 < df["skill_aliases"].is_not_null().sum() < df.height == 16
    assert (sha(path) == sha(prep(bench, policy, tmp_path / "again", renamed_rate=0.5, rename_seed=1))
            != sha(prep(bench, policy, tmp_path / "seed2", renamed_rate=0.5, rename_seed=2)))
    tok = AutoTokenizer.from_pretrained(policy)
    library = {p.name.split("-")[0] for p in (bench / "skills").iterdir()}
    tasks = load_rl_tasks(path, bench, tmp_path / "scratch", policy_dir=policy)
    renamed, gold_suffix_moved = [], 0
    for row, task in zip(df.iter_rows(named=True), tasks, strict=True):
        frozen = [s["name"] for s in row["slate"]]
        # what rl_tasks checks stays the bench's: the frozen slate, the gold skill, the snapshot digest
        assert row["gold_name"] == plain[row["task_id"]]["gold_name"] and frozen == [
            s["name"] for s in plain[row["task_id"]]["slate"]]
        if row["skill_aliases"] is None:
            assert list(task.slate.names) == frozen and row["prompt_ids"] == plain[row["task_id"]]["prompt_ids"]
            continue
        renamed.append(task)
        mapping = json.loads(row["skill_aliases"])
        assert list(task.slate.names) == [mapping[n] for n in frozen] and task.slate.oracle == mapping[row["gold_name"]]
        gold_suffix_moved += mapping[row["gold_name"]].split("-", 2)[2] != row["gold_name"].split("-", 2)[2]
        assert [e.category for e in task.slate.entries] == [s["category"] for s in row["slate"]]
        assert not {n.split("-")[0] for n in mapping.values()} & library
        text = tok.decode(row["prompt_ids"])
        assert all(n in text for n in task.slate.names) and not [o for o in frozen if o in text]
        assert sorted(p.name for p in task.skills_dir.iterdir()) == sorted(task.slate.names)
        assert all(load_skill(task.skills_dir / n).name == n for n in task.slate.names)
    # the suffixes are shuffled within each lookalike group (the default), unless switched off
    assert gold_suffix_moved >= 1
    kept = pl.read_parquet(prep(bench, policy, tmp_path / "kept", renamed_rate=0.5, rename_seed=1,
                                shuffle_suffixes=False))
    for row in kept.filter(pl.col("skill_aliases").is_not_null()).iter_rows(named=True):
        assert all(new.split("-", 1)[1] == old.split("-", 1)[1] for old, new in json.loads(row["skill_aliases"]).items())
    # the reference teacher plays the renamed tasks: it reads by the new names, the reads are categorised, and
    # reading the oracle still resolves (verification never looks at skill names)
    config = GRPOConfig(group_size=4, prompts_per_step=2, num_workers=1, max_turns=4, backend="bwrap",
                        max_rejected_groups=6)
    profile = get_profile("selector_clean_oracle_action_credit")
    teacher = TeacherPolicy(tok, TeacherConfig(misleading_rate=0.5, no_read_rate=0.0, seed=0))
    groups, stats = rollout_step(renamed, PromptStream(len(renamed), seed=0), teacher, tok, profile, config,
                                 RolloutStepFilter(group_size=4, check_spans=True, forces=False), target_groups=2)
    assert groups and stats.episodes >= 8
    for group in groups:
        for e in group.episodes:
            assert e.trajectory.slate_names == group.task.slate.names
            assert e.spans.span_mismatch == 0 and e.spans.reads()
            assert (e.score == 1.0) == (e.spans.reads()[-1] == "oracle")


def test_a_tampered_renaming_is_refused(bench, policy, tmp_path):
    from skillgate_core.base.parquet_rows import read_rows, write_rows
    from skillgate_core.rl.rl_tasks import RLTasksError, load_rl_tasks

    path = prep(bench, policy, tmp_path / "rl", renamed_rate=1.0)
    rows = read_rows(path)
    mapping = json.loads(rows[0]["skill_aliases"])
    mapping[next(iter(mapping))] = "../escape"
    rows[0]["skill_aliases"] = json.dumps(mapping)
    write_rows(rows, tmp_path / "bad.parquet", schema=rl_data_schema())
    with pytest.raises(RLTasksError, match="skill_aliases must map exactly"):
        load_rl_tasks(tmp_path / "bad.parquet", bench, tmp_path / "scratch")


@pytest.mark.parametrize(("field", "value"), [("task_id", "../../planted"), ("task_id", "/tmp/abs"),
                                              ("task_path", "../outside-bench"), ("task_path", "/etc")])
def test_ids_and_paths_of_the_table_are_checked_before_they_name_a_path(bench, policy, tmp_path, field, value):
    """A task id of the table becomes a scratch folder, task_path a package under the bench: both are
    refused (naming the file and the field) before anything is created outside their folders."""
    from skillgate_core.base.parquet_rows import read_rows, write_rows
    from skillgate_core.rl.rl_tasks import RLTasksError, load_rl_tasks

    rows = read_rows(prep(bench, policy, tmp_path / "rl"))
    rows[0][field] = value
    write_rows(rows, bad := tmp_path / "deep" / "bad.parquet", schema=rl_data_schema())
    scratch = tmp_path / "deep" / "scratch"
    with pytest.raises(RLTasksError, match=f"bad.parquet.*{field}"):
        load_rl_tasks(bad, bench, scratch)
    assert not (tmp_path / "planted").exists() and not scratch.exists()

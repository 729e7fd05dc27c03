"""`skillgate traj show` on a real trajectories dataset made by the real collect code (bubblewrap
sandboxes, the reference teacher with selection noise, the tiny policy's tokenizer)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from deployments.cli import app
from skillgate_core.agent.collect import CollectConfig, collect_trajectories
from skillgate_core.base.paths import state_layout
from skillgate_core.credit import selector_advantages, task_advantages
from skillgate_core.pipeline.run import StageRecord
from warehouse import StageRunRecorder

runner = CliRunner()


@pytest.fixture(scope="module")
def collected(bwrap_ready, bench, tiny_model_dir, tmp_path_factory) -> Path:
    """2 tasks x 4 repeats; misleading_rate 0.5 makes groups whose episodes read different skills."""
    out = tmp_path_factory.mktemp("collect")
    result = collect_trajectories(CollectConfig(max_tasks=2, repeats=4, misleading_rate=0.5, seed=3),
                                  {"bench": bench, "base_model": tiny_model_dir}, out)
    return result.outputs["trajectories"]


def _rows(collected: Path) -> list[dict]:
    return pl.read_parquet(collected / "trajectories.parquet").to_dicts()


def _show(*args: str) -> str:
    res = runner.invoke(app, ["traj", "show", *args], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    return res.output


def test_the_json_view_is_the_recorded_tokens_and_the_methods_group_credit(collected: Path):
    rows = _rows(collected)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[r["task_id"]].append(i)
    mixed = [g for g in groups.values() if len({rows[i]["score"] for i in g}) > 1]
    assert mixed, "the seed must give a group whose episodes scored differently"
    for members in groups.values():
        scores = [rows[i]["raw_score"] for i in members]
        a_task = task_advantages(scores) if members in mixed else [None] * len(members)
        a_sel = (selector_advantages([rows[i]["reads"] for i in members], "clean_oracle") if members in mixed
                 else [[None] * len(rows[i]["reads"]) for i in members])
        for i, adv, sel in zip(members, a_task, a_sel, strict=True):
            ep = json.loads(_show(str(collected), "--episode", str(i), "--json"))
            row, spans, turns = rows[i], json.loads(rows[i]["spans"]), json.loads(rows[i]["turns"])
            assert (ep["task_id"], ep["repeat"], ep["trained_tokens"]) == (row["task_id"], row["repeat"],
                                                                         sum(row["loss_mask"]))
            assert [t["tokens"] for t in ep["turns"]] == [[t["token_start"], t["token_end"]] for t in turns]
            assert all(t["trained_tokens"] == t["tokens"][1] - t["tokens"][0] for t in ep["turns"])  # sampled: mask 1
            actions = [a for t in ep["turns"] for a in t["actions"]]
            assert [(a["skill_name"], a["category"], a["call_tokens"], a["identity_tokens"]) for a in actions] == [
                (a["skill_name"], a["category"], len(a["call_token_indices"]), len(a["identity_token_indices"]))
                for a in spans["actions"]]
            assert ep["credit"]["group_size"] == len(members) and ep["credit"]["task_advantage"] == adv
            assert [a["selector_advantage"] for a in actions] == sel
            if adv is None:
                assert "every episode scored the same" in ep["credit"]["note"]


def test_list_then_show_one_episode_with_its_turns_mask_and_selection(collected: Path):
    rows = _rows(collected)
    listing = _show(str(collected / "trajectories.parquet"), "--list")
    assert "8 episode(s)" in listing and all(r["task_id"] in listing for r in rows)
    # an episode that read a skill, in a group with credit
    i = next(i for i, r in enumerate(rows) if r["reads"] == ["misleading"]
             and len({x["score"] for x in rows if x["task_id"] == r["task_id"]}) > 1)
    out = _show(str(collected), "--episode", str(i))
    flat = " ".join(out.replace("│", " ").split())  # panel borders out: wrapped lines read as one
    action = json.loads(rows[i]["spans"])["actions"][0]
    assert f"episode {i} of 8" in flat and rows[i]["task_id"] in flat and f"gold skill: {rows[i]['gold']}" in flat
    assert re.search(r"assistant turn 0 · tokens 0-(\d+) · trained \1/\1", flat)
    assert (f"▶ selection: read {action['skill_name']} (misleading, call 0) · {len(action['call_token_indices'])} "
            f"call tokens (no outcome credit), {len(action['identity_token_indices'])} identity tokens · A_sel = -") in flat
    assert "tool response · context" in flat and "mask 0" in flat and "A_task = -" in flat
    first_line = json.loads(rows[i]["messages"])[1]["content"].splitlines()[0]
    assert " ".join(first_line.split()) in flat  # the task instruction, as context


def test_a_dataset_digest_or_the_collect_run_names_the_source(collected: Path, skillgate_home: Path):
    from skillgate_core.base.digests import path_sha256
    from skillgate_core.policy.tiny_model import TinyModelConfig

    sha = path_sha256(collected)
    rec = StageRecord(stage="collect", config_digest="", config={}, inputs={}, input_digests={},
                      outputs={"trajectories": str(collected)}, output_digests={"trajectories": sha},
                      out_dir=str(collected.parent), metrics={}, seconds=1.0, reused=False)
    run = StageRunRecorder.start("collect", TinyModelConfig(), trigger="test", state=state_layout())
    run.finish(rec)
    task = _rows(collected)[0]["task_id"]
    by_digest = json.loads(_show(sha[:8], "--task", task, "--repeat", "1", "--json"))
    assert (by_digest["task_id"], by_digest["repeat"]) == (task, 1)
    assert json.loads(_show(run.run_id, "--episode", "0", "--json"))["task_id"] == task
    res = runner.invoke(app, ["traj", "show", str(collected), "--episode", "99"])
    assert res.exit_code == 2 and "holds episodes 0-7" in res.output
    res = runner.invoke(app, ["traj", "show", str(collected), "--task", "no-such-task"])
    assert res.exit_code == 2 and task in res.output


def test_the_list_ends_with_the_premise_of_the_dataset(collected: Path):
    """docs/method.md 8b from the rows' own facts: the noisy teacher's oracle reads are clean and resolve (P1 0), its
    lookalike reads fail and never recover; each episode's name / call / reasoning tokens are listed."""
    from skillgate_core.agent.premise_facts import row_premise

    rows = _rows(collected)
    facts = [row_premise(r) for r in rows]
    readers = sum("oracle" in r["reads"] for r in rows)
    others = sum(bool(r["reads"]) and r["reads"][0] != "oracle" for r in rows)
    assert 0 < readers < len(rows) and others == len(rows) - readers
    flat = " ".join(_show(str(collected), "--list").replace("│", " ").split())
    assert f"P1 outcome vs selection: 0.0% (0/{readers})" in flat
    assert f"multi-read 0.0% (0/{len(rows)})" in flat and f"recovery 0.0% (0/{others}) of first reads" in flat
    sampled = sum(f.sampled_tokens for f in facts)
    names = sum(f.name_tokens for f in facts)
    assert f"name {100 * names / sampled:.2f}% ({names}/{sampled})" in flat
    for f in facts:
        assert f"{f.name_tokens}/{f.call_tokens}/{f.reasoning_tokens}" in flat
    listed = json.loads(_show(str(collected), "--list", "--json"))
    assert [e["premise"] for e in listed] == [f.as_record() for f in facts]

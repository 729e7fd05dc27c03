"""`skillgate traj show` on an evaluation's per-trial logs (text and calls, no token ids), written by the
real runner playing the scripted reference agent over HTTP in real bubblewrap sandboxes."""

from __future__ import annotations

import json

from chat_server import ChatServer, reference_agent
from typer.testing import CliRunner

from deployments.cli import app
from skillgate_core.base.paths import state_layout
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec

runner = CliRunner()


def test_evaluation_logs_show_their_turns_and_the_reads_found_in_the_calls(skillgate_home, tiny_model_dir, bench,
                                                                            tiny_spec, bwrap_ready):
    spec = tiny_spec.with_name("endpoint.toml")
    spec.write_text(tiny_spec.read_text().replace("max_turns = 2", "max_turns = 4")
                    .replace("context_size = 4096", "context_size = 32768").replace("max_new_tokens = 24",
                                                                                    "max_new_tokens = 512"))
    resolved = build_protocol(load_spec(spec), bench)
    oracles = {load_task_package(bench / r["path"]).instruction: r["oracle"] for r in load_bench_rows(bench, "eval70_v1")}
    with ChatServer(reference_agent(oracles)) as server:
        ref = resolve_policy(server.base_url, root=state_layout().experiments, model="ref-agent")
        result = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, tokenizer=str(tiny_model_dir)),
                                progress=False)
    rows = result.rows
    listing = runner.invoke(app, ["traj", "show", str(result.eval_dir), "--json"])
    episodes = json.loads(listing.output)
    assert [(e["task_id"], e["repeat"]) for e in episodes] == [(r["task_id"], r["repeat"]) for r in rows]
    for ep, row in zip(episodes, rows, strict=True):
        actions = [a for t in ep["turns"] for a in t["actions"]]
        assert [a["category"] for a in actions] == row["reads"] == ["oracle"]
        assert [a["skill_name"] for a in actions] == row["read_names"] and actions[0]["call_tokens"] is None
        assert ep["trained_tokens"] is None and len(ep["turns"]) == row["turns"]
        # both repeats of a task resolved: a group the filter rejects, said as such
        assert ep["credit"]["task_advantage"] is None and "scored the same" in ep["credit"]["note"]
    # the premise (docs/method.md 8b): the tokenizer gave real ids, so each row counts its choosing tokens; every
    # trial read the oracle cleanly and resolved: P1 is 0; the list view says so from the rows beside the logs
    for row in rows:
        assert 0 < row["name_tokens"] < row["read_call_tokens"] and row["reasoning_tokens"] > 0
    premise = result.summary["premise"]
    n = len(rows)
    assert (premise["episodes"], premise["oracle_read_episodes"], premise["token_episodes"]) == (n, n, n)
    assert premise["p1_disagreement_share"] == 0 and premise["sampled_tokens"] == sum(r["loss_tokens"] for r in rows)
    assert premise["reasoning_tokens"] == sum(r["reasoning_tokens"] for r in rows)
    assert [e["premise"]["name_tokens"] for e in episodes] == [r["name_tokens"] for r in rows]
    shown = runner.invoke(app, ["traj", "show", str(result.eval_dir), "--list"], env={"COLUMNS": "200"})
    flat = " ".join(shown.output.replace("│", " ").split())
    assert f"P1 outcome vs selection: 0.0% (0/{n})" in flat and f"multi-read 0.0% (0/{n})" in flat
    one = result.rows_dir / f"{rows[0]['task_id']}--r0" / "trajectory.json"
    res = runner.invoke(app, ["traj", "show", str(one), "--episode", "0"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.replace("│", " ").split())
    assert f"▶ selection: read {rows[0]['read_names'][0]} (oracle, call 0) · " not in flat  # no token counts here
    assert f"▶ selection: read {rows[0]['read_names'][0]} (oracle, call 0)" in flat
    assert "tokens: not recorded by this source" in flat and "assistant turn 2" in flat

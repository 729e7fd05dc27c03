"""The OpenAI-compatible client against a real local HTTP server with scripted replies: as an evaluation
policy (through the runner, real sandboxes) and as the `collect` teacher."""

from __future__ import annotations

import json

import polars as pl
import pytest
from chat_server import ChatServer, reference_agent

from skillgate_core.agent.collect import CollectConfig, collect_trajectories
from skillgate_core.agent.episode import EpisodeSpec, EpisodeView
from skillgate_core.agent.openai_policy import OpenAIPolicy
from skillgate_core.base.paths import state_layout
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.runner import EvalRunConfig, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec
from skillgate_core.policy.openai_chat import EndpointError, OpenAIEndpoint, chat_completion

MESSAGES = [{"role": "system", "content": "# Tools"}, {"role": "user", "content": "do it"}]


def _oracles(bench, split):
    return {load_task_package(bench / r["path"]).instruction: r["oracle"] for r in load_bench_rows(bench, split)}


def test_client_retries_busy_servers_and_reports_errors(monkeypatch):
    answers = iter([429, 503, ("ok <tool_call>{}", "length")])
    with ChatServer(lambda body: next(answers)) as server:
        monkeypatch.setenv("SKILLGATE_TEST_API_KEY", "sk-test")
        monkeypatch.setenv("SKILLGATE_TEST_BASE_URLS", server.base_url)
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", api_key_env="SKILLGATE_TEST_API_KEY",
                                  retries=2)
        turn = chat_completion(endpoint, MESSAGES, temperature=0.5, top_p=0.9, max_tokens=7, seed=2**40 + 3)
        assert (turn.text, turn.finish) == ("ok <tool_call>{}", "length") and len(server.requests) == 3
        body = server.requests[-1]
        assert body["auth"] == "Bearer sk-test" and body["model"] == "m" and body["messages"] == MESSAGES
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.5, 0.9, 7, 3)
        assert "tools" not in body  # tools travel as text in the system prompt
    with ChatServer(lambda body: 400) as server:
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", retries=3)
        with pytest.raises(EndpointError, match=r"HTTP 400 \(application/json, \d+ bytes\)$"):  # described, not quoted
            chat_completion(endpoint, MESSAGES, temperature=1.0, top_p=1.0, max_tokens=5)
        assert len(server.requests) == 1  # a client error is not retried
    with pytest.raises(EndpointError, match="after 1 attempts"):
        chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m", retries=0), MESSAGES,
                        temperature=1.0, top_p=1.0, max_tokens=5)


def test_policy_keeps_the_text_and_tokenizes_it_once(tiny_model_dir, bench):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    replies = iter([("first <tool_call>{\"name\": \"ls\", \"arguments\": {}}</tool_call>", "stop"), ("cut sh", "length")])
    row = load_bench_rows(bench, "eval70_v1")[0]
    spec = EpisodeSpec(load_task_package(bench / row["path"]), None)
    views = [EpisodeView(spec, list(MESSAGES), [1, 2, 3], turn=0, max_new_tokens=50) for _ in range(2)]
    with ChatServer(lambda body: next(replies)) as server:
        policy = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m", concurrency=1), tok,
                              max_new_tokens=30, seed_of=lambda view: 5)
        stopped, cut = policy.act(views)
    assert stopped.text.startswith("first") and stopped.finish == "stop" and stopped.logprobs == ()
    assert list(stopped.token_ids) == tok(stopped.text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert cut.finish == "length" and list(cut.token_ids) == tok("cut sh", add_special_tokens=False)["input_ids"]
    assert [r["max_tokens"] for r in server.requests] == [30, 30] and server.requests[0]["seed"] == server.requests[1]["seed"]
    assert policy.usage["requests"] == 2


@pytest.mark.usefixtures("bwrap_ready")
def test_endpoint_policy_through_the_runner(skillgate_home, tiny_model_dir, bench, tiny_spec):
    spec_file = tiny_spec.with_name("endpoint.toml")
    spec_file.write_text(tiny_spec.read_text().replace("max_turns = 2", "max_turns = 4")
                         .replace("context_size = 4096", "context_size = 32768")
                         .replace("max_new_tokens = 24", "max_new_tokens = 512"))
    resolved = build_protocol(load_spec(spec_file), bench)
    with ChatServer(reference_agent(_oracles(bench, "eval70_v1"))) as server:
        ref = resolve_policy(server.base_url, root=state_layout().experiments, model="ref-agent")
        assert ref.kind == "endpoint" and ref.experiment_id.startswith("standalone-eval-endpoint-")
        assert (ref.model_dir, ref.label) == (None, "ref-agent")
        counted = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, tag="usage"), progress=False)
        server.requests.clear()
        result = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, tokenizer=str(tiny_model_dir)),
                                progress=False)
        requests = list(server.requests)
    assert result.status == "completed" and len(result.rows) == 4
    p = resolved.protocol
    for row in result.rows:
        oracle = _oracles(bench, "eval70_v1")
        assert row["reads"] == ["oracle"] and row["read_names"][0] in oracle.values()
        assert row["first_read_category"] == "oracle" and row["skill_reasoning"] is True
        assert row["turns"] == 3 and row["status"] == "completed" and row["method"] == "ref-agent"
        assert row["policy"] == server.base_url and row["outcome"] in ("resolved", "fail")
    assert [r["outcome"] for r in result.rows] == ["resolved"] * 4, [r["score"] for r in result.rows]
    assert len(requests) == 12 and all(r["model"] == "ref-agent" and r["temperature"] == p.temperature
                                       and r["top_p"] == p.top_p and r["max_tokens"] <= 512 for r in requests)
    assert all(r["messages"][0]["content"].startswith("# Tools") for r in requests)
    # every trial sends its own seeds, fixed by the protocol: two trials never share one
    assert len({r["seed"] for r in requests}) == 12
    log = json.loads((result.rows_dir / f"{result.rows[0]['task_id']}--r0" / "trajectory.json").read_text())
    assert log["turns"][0]["text"] == log["messages"][2]["content"]  # the server's text, as returned
    assert result.summary is not None and result.summary["token_counts"] == "tokenizer"
    assert not result.summary["token_counts_note"]
    # no tokenizer: the same trials, counted from the server's usage (len(text) // 4 per turn here), and said so
    assert counted.status == "completed" and [r["outcome"] for r in counted.rows] == ["resolved"] * 4
    assert counted.summary is not None and counted.summary["token_counts"] == "endpoint usage"
    assert "context limit is checked after each reply" in counted.summary["token_counts_note"]
    log = json.loads((counted.rows_dir / f"{counted.rows[0]['task_id']}--r0" / "trajectory.json").read_text())
    turns = [m["content"] for m in log["messages"] if m["role"] == "assistant"]
    assert log["token_counts"] == "endpoint usage" and log["response_tokens"] == sum(len(t) // 4 for t in turns)
    assert log["prompt_tokens"] == sum(len(m["content"]) for m in log["messages"][:2]) // 4
    assert log["context_tokens"] > log["prompt_tokens"] + log["response_tokens"]  # the observations, as the server counts


def test_collect_with_an_openai_teacher(skillgate_home, tiny_model_dir, bench, tmp_path, bwrap_ready):
    with pytest.raises(ValueError, match="teacher_base_url"):
        CollectConfig(teacher="openai")
    with ChatServer(reference_agent(_oracles(bench, "train"))) as server:
        config = CollectConfig(max_tasks=2, repeats=1, teacher="openai", teacher_base_url=server.base_url,
                               teacher_model="ref-agent", max_turns=4)
        out = collect_trajectories(config, {"bench": bench, "base_model": tiny_model_dir}, tmp_path / "out")
    frame = pl.read_parquet(out.outputs["trajectories"] / "trajectories.parquet")
    assert frame.height == 2 and set(frame["policy"]) == {"openai:ref-agent"}
    assert all(reads == ["oracle"] for reads in frame["reads"].to_list())
    assert out.metrics["teacher"] == "openai:ref-agent" and out.metrics["teacher_usage"]["requests"] == 6
    assert out.metrics["span_mismatches"] == 0

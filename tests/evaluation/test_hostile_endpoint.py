"""A hostile OpenAI-compatible endpoint (a real local HTTP server that misbehaves) costs bounded
memory and time and ends in a clear EndpointError; a policy turns it into an error of that episode,
and an evaluation records the trial as an error and goes on."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_server import HostileServer

from skillgate_core.agent.episode import EpisodeSpec, EpisodeView
from skillgate_core.agent.openai_policy import OpenAIPolicy
from skillgate_core.policy.openai_chat import EndpointError, OpenAIEndpoint, chat_completion

MESSAGES = [{"role": "system", "content": "# Tools"}, {"role": "user", "content": "do it"}]


def _ask(server: HostileServer, **endpoint: object) -> None:
    # max_tokens 1024: its reply bound (320 KiB) lets the malformed bodies through to the checks they meet
    chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m", retries=0, **endpoint), MESSAGES,
                    temperature=1.0, max_tokens=1024)


def test_an_unbounded_body_is_cut_at_the_byte_limit():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with HostileServer("huge") as server:
        started = time.monotonic()
        with pytest.raises(EndpointError, match=r"reply is larger than 4194304 bytes; read no further"):
            # a max_tokens this large would allow more: max_reply_bytes bounds every reply
            chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m", retries=0, max_reply_bytes=4 * 2**20),
                            MESSAGES, temperature=1.0, max_tokens=100_000)
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: far below 100 MB


def test_a_slow_drip_ends_at_the_total_deadline():
    with HostileServer("drip") as server:
        started = time.monotonic()
        with pytest.raises(EndpointError, match=r"no complete reply within the deadline of 1.5 s"):
            _ask(server, deadline_s=1.5, timeout_s=30.0)
        assert time.monotonic() - started < 4


@pytest.mark.parametrize(("mode", "message"), [
    ("not_utf8", "not UTF-8"), ("deep", "not JSON"), ("not_json", "not JSON"),
    ("bad_usage", "usage"), ("message_not_object", "not a chat completion"), ("truncated", "reply ended early"),
])
def test_a_malformed_body_is_a_clear_endpoint_error(mode: str, message: str):
    with HostileServer(mode) as server, pytest.raises(EndpointError, match=message) as err:
        _ask(server)
    assert server.base_url in str(err.value)


def test_the_policy_enforces_max_tokens_and_turns_a_failure_into_that_episodes_error(tiny_model_dir, bench):
    from transformers import AutoTokenizer

    from skillgate_core.envs.bench_index import load_bench_rows
    from skillgate_core.envs.task_package import load_task_package

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    row = load_bench_rows(bench, "eval70_v1")[0]
    view = EpisodeView(EpisodeSpec(load_task_package(bench / row["path"]), None), list(MESSAGES), [1, 2, 3], turn=0,
                       max_new_tokens=50)
    with HostileServer("long_reply") as server:
        (turn,) = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m"), tok, max_new_tokens=20).act([view])
    assert len(turn.token_ids) == 20 and turn.finish == "length" and not turn.error
    with HostileServer("not_json") as server:
        (turn,) = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m", retries=0), tok).act([view])
    assert turn.error and "not JSON" in turn.error and turn.token_ids == ()


SIGTERM_CHILD = """
import signal, sys, types
from skillgate_core.agent.openai_policy import OpenAIPolicy
from skillgate_core.policy.openai_chat import OpenAIEndpoint

def stop(signum, frame):
    raise SystemExit("SIGTERM")

signal.signal(signal.SIGTERM, stop)  # as the evaluation runner does while trials run
policy = OpenAIPolicy(OpenAIEndpoint(base_url=sys.argv[1], model="m", retries=0), None)
print("asking", flush=True)
policy.act([types.SimpleNamespace(messages=[], max_new_tokens=4)] * 2)
"""


def test_sigterm_stops_a_process_waiting_on_a_dripping_endpoint():
    with HostileServer("drip") as server:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        child = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, server.base_url], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "asking"
        while server.requests < 2:
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            child.wait(timeout=10)
        finally:
            child.kill()
            child.communicate()
        assert time.monotonic() - started < 5


@pytest.mark.usefixtures("bwrap_ready")
def test_an_evaluation_records_no_trial_of_a_hostile_endpoint(skillgate_home, tiny_model_dir, bench, tiny_spec):
    from skillgate_core.base.paths import state_layout
    from skillgate_core.evaluation.owner import resolve_policy
    from skillgate_core.evaluation.runner import ABORTED_FILE, EvalRunConfig, run_evaluation
    from skillgate_core.evaluation.specs import build_protocol, load_spec

    resolved = build_protocol(load_spec(tiny_spec), bench)
    with HostileServer("not_json") as server:  # ("deep", 200 KB, is now refused by its size at these max_tokens)
        ref = resolve_policy(server.base_url, root=state_layout().experiments, model="hostile",
                             endpoint_options={"retries": 0})
        result = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4, tokenizer=str(tiny_model_dir)),
                                progress=False)
    # its failures are not the policy's trials: no row, each logged with why, replayed by the next attempt
    assert (result.status, result.rows, result.trials_aborted) == ("incomplete", (), 4)
    logged = [json.loads(line) for line in (result.eval_dir / ABORTED_FILE).read_text().splitlines()]
    assert len(logged) == 4 and all("not JSON" in e["error"] for e in logged)

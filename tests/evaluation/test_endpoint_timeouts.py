"""A slow OpenAI-compatible endpoint (a real local HTTP server that sleeps before answering): a request
past the timeout is sent once and fails with a reason that says so, slow requests are reported once,
and a model with no local tokenizer is counted from the endpoint's usage."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import pytest
from chat_server import ChatServer
from support.skillgate_cli import run_skillgate

from skillgate_core.agent.episode import EpisodeSpec, EpisodeView
from skillgate_core.agent.openai_policy import USAGE_ID, OpenAIPolicy
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.policy.openai_chat import EndpointError, OpenAIEndpoint, chat_completion

MESSAGES = [{"role": "system", "content": "# Tools"}, {"role": "user", "content": "do it"}]


def _slow(seconds: float, text: str = "Done.", status: int | None = None):
    def reply(body):
        time.sleep(seconds)
        return status if status is not None else (text, "stop")

    return reply


def _view(bench: Path, max_new_tokens: int = 50) -> EpisodeView:
    row = load_bench_rows(bench, "eval70_v1")[0]
    return EpisodeView(EpisodeSpec(load_task_package(bench / row["path"]), None), list(MESSAGES), [], turn=0,
                       max_new_tokens=max_new_tokens)


def test_a_request_past_the_timeout_is_sent_once_and_fails_saying_so():
    with ChatServer(_slow(2.0)) as server:
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", timeout_s=0.5, retries=4)
        started = time.monotonic()
        with pytest.raises(EndpointError, match=r"timed out: no reply within the request timeout of 0.5 s; "
                                                r"not sent again"):
            chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=8)
        assert time.monotonic() - started < 1.5  # no backoff, no second attempt
        time.sleep(2.0)  # a re-send would have arrived by now
        assert len(server.requests) == 1


def test_a_gateway_timeout_is_not_sent_again_but_a_busy_server_is():
    with ChatServer(_slow(0, status=504)) as server:
        with pytest.raises(EndpointError, match="HTTP 504"):
            chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m", retries=3), MESSAGES,
                            temperature=1.0, max_tokens=8)
        assert len(server.requests) == 1
    answers = iter([503, ("ok", "stop")])
    with ChatServer(lambda body: next(answers)) as server:
        turn = chat_completion(OpenAIEndpoint(base_url=server.base_url, model="m", retries=1), MESSAGES,
                               temperature=1.0, max_tokens=8)
        assert turn.text == "ok" and len(server.requests) == 2


def test_slow_requests_are_reported_once_and_a_timeout_is_that_turns_error(bench):
    view = _view(bench)
    with ChatServer(_slow(0.6)) as server:
        policy = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m", slow_request_s=0.2), None)
        with pytest.warns(UserWarning, match=r"2 of 2 requests still unanswered after 0.2 s \(request timeout 600 s"):
            first = policy.act([view, view])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second slow call says nothing more
            second = policy.act([view])
    assert [t.text for t in (*first, *second)] == ["Done."] * 3 and not any(t.error for t in (*first, *second))
    with ChatServer(_slow(2.0)) as server:
        (turn,) = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m", timeout_s=0.5), None).act([view])
        assert "timed out" in turn.error and "not sent again" in turn.error and turn.token_ids == ()
        assert len(server.requests) == 1


def test_without_a_tokenizer_a_turn_is_counted_from_the_endpoints_usage(bench):
    text = "a" * 40  # the test server reports len(text) // 4 completion tokens, len(messages text) // 4 prompt ones
    with ChatServer(lambda body: (text, "stop")) as server:
        (turn,) = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m"), None).act([_view(bench)])
        (cut,) = OpenAIPolicy(OpenAIEndpoint(base_url=server.base_url, model="m"), None).act([_view(bench, 4)])
    assert turn.token_ids == (USAGE_ID,) * 10 and turn.finish == "stop" and turn.text == text
    assert turn.context_tokens == len("# Tools" + "do it") // 4
    assert cut.token_ids == (USAGE_ID,) * 4 and cut.finish == "length"  # the server ignored max_tokens


@pytest.mark.usefixtures("bwrap_ready")
def test_eval_run_with_a_timeout_and_no_tokenizer_logs_the_timeout_and_sends_once(tmp_path, bench, tiny_spec):
    home = tmp_path / "home"
    with ChatServer(_slow(3.0)) as server:
        done = run_skillgate("eval", "run", "--policy", server.base_url, "--model", "slow-model", "--protocol",
                             str(tiny_spec), "--bench", str(bench), "--batch", "1", "--max-trials", "1",
                             "--request-timeout", "1", home=home)
        time.sleep(3.0)  # a re-send would have arrived by now
        sent = len(server.requests)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "status incomplete: 0/4 trials (1 run now, 1 aborted" in done.stdout, out
    assert "note: no --tokenizer: token counts are the endpoint's usage" in " ".join(done.stdout.split()), out
    assert sent == 1
    # the timeout is the endpoint's failure, not the policy's trial: no row, one line saying why
    assert not list(home.glob("experiments/standalone-eval-endpoint-*/eval/*/rows/*/row.json"))
    (log,) = home.glob("experiments/standalone-eval-endpoint-*/eval/*/aborted.jsonl")
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert "request timed out" in entry["error"] and "not sent again" in entry["error"]

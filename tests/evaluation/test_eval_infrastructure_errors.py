"""Infrastructure failures are not the policy's trials. An endpoint with nothing listening: `eval run`
stops after one batch with an error naming the cause and exit code 3, its progress counts the errors,
no row is written for the aborted trials (none in the rows, none in the warehouse), and the same
command, once the endpoint answers, plays exactly the trials without a row. Isolated aborts leave the
evaluation incomplete, and a resume replays exactly them. An interrupt says how many trials it played.
Before the first trial the command says what the run will take and when the protocol's context
exceeds the model's (with --tokenizer too)."""

from __future__ import annotations

import json
import socket

import pytest
from chat_server import ChatServer, reference_agent
from support.skillgate_cli import run_skillgate

from skillgate_core.base.paths import state_layout
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.observer import observing
from skillgate_core.evaluation.owner import resolve_policy
from skillgate_core.evaluation.runner import ABORTED_FILE, EvalRunConfig, eval_id_for, run_evaluation
from skillgate_core.evaluation.specs import build_protocol, load_spec
from skillgate_core.ownership import experiment_dir, load_eval
from warehouse import query

pytestmark = pytest.mark.usefixtures("bwrap_ready")


@pytest.fixture
def endpoint_spec(tiny_spec):
    """The tiny protocol with room for the reference agent's three turns, and eval70_v1's context (16,384
    tokens: more than the tiny model's 8,192 positions, as with SmolLM2)."""
    path = tiny_spec.with_name("endpoint.toml")
    path.write_text(tiny_spec.read_text().replace("max_turns = 2", "max_turns = 4")
                    .replace("context_size = 4096", "context_size = 16384")
                    .replace("max_new_tokens = 24", "max_new_tokens = 512"))
    return path


def _oracles(bench):
    return {load_task_package(bench / r["path"]).instruction: r["oracle"] for r in load_bench_rows(bench, "eval70_v1")}


def _port_with_nothing_on_it() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_endpoint_stops_the_run_and_the_same_command_then_plays_its_trials(tmp_path, bench, endpoint_spec,
                                                                                  tiny_model_dir):
    home, port = tmp_path / "home", _port_with_nothing_on_it()
    args = ["eval", "run", "--policy", f"http://127.0.0.1:{port}/v1", "--model", "ref-agent", "--protocol",
            str(endpoint_spec), "--bench", str(bench), "--batch", "2", "--stop-after-errors", "2",
            "--tokenizer", str(tiny_model_dir)]
    dead = run_skillgate(*args, home=home)
    out = dead.stdout + dead.stderr
    assert dead.returncode == 3, out
    assert "Traceback" not in out, out
    assert "the last 2 trials in a row aborted" in out and "Connection refused" in out, out
    assert "errors=2" in out, out  # where the progress shows
    # said before the first trial: the context past the tokenizer's model, the estimate (nothing to time it by)
    warning = out.index("allows 16,384 context tokens, the model of --tokenizer")
    assert "trained to 8,192 positions" in out and warning < out.index("stopped:"), out
    assert "estimate: " in out and "no recorded trial of this protocol to time it by" in out, out
    state = state_layout(home)
    [(status, detail)] = query("select status, status_detail from v_evaluation", state=state).rows
    assert status == "failed" and "TrialsAbortedInARow" in detail and "Connection refused" in detail
    assert query("select count(*) from v_eval_trial", state=state).rows == [(0,)]
    [log] = list(home.rglob(ABORTED_FILE))
    aborted = [json.loads(line) for line in log.read_text().splitlines()]
    assert [a["trial_index"] for a in aborted] == [0, 1], aborted  # one batch, then stopped: 2 trials never started
    assert all("Connection refused" in a["error"] and a["attempt"] == 1 for a in aborted)
    assert not list(log.parent.glob("rows/*/row.json"))

    with ChatServer(reference_agent(_oracles(bench)), port=port):
        alive = run_skillgate(*args, home=home)
        trials = query("select status, outcome from v_eval_trial", state=state).rows
        # the next evaluation of this endpoint under this protocol is timed by the trials on record
        timed = run_skillgate(*args, "--tag", "again", "--max-trials", "2", home=home)
    assert alive.returncode == 0, alive.stdout + alive.stderr
    assert "status completed: 4/4 trials (4 run now)" in alive.stdout, alive.stdout
    assert "errors=0" in alive.stderr, alive.stderr
    assert len(trials) == 4 and all(s != "aborted" and o != "error" for s, o in trials), trials
    assert timed.returncode == 1, timed.stdout + timed.stderr  # incomplete by --max-trials
    assert "4 recorded trials of these targets" in timed.stdout, timed.stdout


def test_isolated_aborts_leave_it_incomplete_and_a_resume_plays_exactly_them(skillgate_home, bench, endpoint_spec):
    resolved = build_protocol(load_spec(endpoint_spec), bench)
    agent = reference_agent(_oracles(bench))
    second = load_task_package(resolved.tasks[1].path).instruction
    refusing = {"second task": True}

    def reply(body):  # the second task's requests fail (HTTP 400 is never retried) until told otherwise
        if refusing["second task"] and body["messages"][1]["content"] == second:
            return 400
        return agent(body)

    root = state_layout().experiments
    with ChatServer(reply) as server:
        ref = resolve_policy(server.base_url, root=root, model="ref-agent")
        first = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4), progress=False)
        detail = load_eval(experiment_dir(root, ref.experiment_id), first.eval_id).detail
        refusing["second task"] = False
        server.requests.clear()
        resumed = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=4), progress=False)
        replayed = {r["messages"][1]["content"] for r in server.requests}
    assert (first.status, first.trials_run, first.trials_aborted) == ("incomplete", 4, 2)
    assert [r["task_id"] for r in first.rows] == [resolved.tasks[0].task_id] * 2
    assert "2 trials aborted on infrastructure failures" in detail and "HTTP 400" in detail, detail
    assert (resumed.status, resumed.trials_run, resumed.trials_aborted) == ("completed", 2, 0)
    assert replayed == {second}  # exactly the trials without a row
    assert resumed.summary is not None and resumed.summary["errors"] == 0 and resumed.summary["trials"] == 4


class _CtrlCAfterTheFirstBatch:
    """Ctrl-C lands as the first batch's rows are reported (the runner's interrupt path, as a user hits it)."""

    def started(self, info):
        pass

    def trials(self, info, rows):
        raise KeyboardInterrupt

    def ended(self, info, record, summary):
        pass


def test_an_interrupt_says_how_many_trials_this_attempt_played(skillgate_home, bench, endpoint_spec):
    resolved = build_protocol(load_spec(endpoint_spec), bench)
    root = state_layout().experiments
    with ChatServer(reference_agent(_oracles(bench))) as server:
        ref = resolve_policy(server.base_url, root=root, model="ref-agent")
        with observing(_CtrlCAfterTheFirstBatch()), pytest.raises(KeyboardInterrupt):
            run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=2), progress=False)
    eval_id = eval_id_for(ref.export_id, resolved.protocol.protocol_id())
    record = load_eval(experiment_dir(root, ref.experiment_id), eval_id)
    assert record.status == "incomplete" and "after 2 trials of this attempt" in record.detail, record.detail


def test_a_local_model_with_less_context_than_the_protocol_is_warned_before_the_first_trial(tmp_path, bench,
                                                                                             endpoint_spec,
                                                                                             tiny_model_dir):
    done = run_skillgate("eval", "run", "--policy", str(tiny_model_dir), "--protocol", str(endpoint_spec),
                         "--bench", str(bench), "--max-trials", "1", "--batch", "1", home=tmp_path / "home")
    assert done.returncode == 1, done.stdout + done.stderr  # incomplete by --max-trials
    line = next((x for x in done.stdout.splitlines() if x.startswith("warning: ")), "")
    assert "allows 16,384 context tokens, the model at " in line and "trained to 8,192 positions" in line, done.stdout
    assert done.stdout.index(line) < done.stdout.index("status incomplete")


def test_a_resume_names_the_aborted_rows_an_earlier_version_wrote(tmp_path, bench, endpoint_spec):
    home = tmp_path / "home"
    with ChatServer(reference_agent(_oracles(bench))) as server:
        args = ["eval", "run", "--policy", server.base_url, "--model", "ref-agent", "--protocol", str(endpoint_spec),
                "--bench", str(bench), "--batch", "2"]
        first = run_skillgate(*args, "--max-trials", "2", home=home)
        assert first.returncode == 1, first.stdout + first.stderr
        # a row as the runner wrote an aborted trial before 2026-12-08: status aborted, outcome error
        row_file = sorted(home.glob("experiments/*/eval/*/rows/*/row.json"))[0]
        row = json.loads(row_file.read_text())
        row.update(status="aborted", outcome="error", error="policy failed: Connection refused (after 5 attempts)")
        row_file.write_text(json.dumps(row))
        resumed = run_skillgate(*args, home=home)
    out = " ".join(resumed.stdout.split())
    assert resumed.returncode == 0 and "status completed: 4/4 trials (2 run now)" in out, out
    assert "note: 1 rows of this evaluation record aborted trials" in out and "a new --tag" in out, out

"""The episode loop driven by SGLangPolicy against a local server answering in SGLang's format.

Real bench tasks, real bubblewrap sandboxes, the real verifier and span detection; the "server" is
tests/support/sglang_recorded_server.py, answering each /generate with a scripted turn (read the oracle
skill, then a final answer) as token ids of the policy's own tokenizer with recorded log-probs.
"""

from __future__ import annotations

import math

import pytest
from support.sglang_recorded_server import RecordedSGLang

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes
from skillgate_core.agent.policies import SGLangPolicy, first_read_turn, turn_token_ids
from skillgate_core.agent.prompts import DEFAULT_PROFILE, build_messages, render_prompt_ids
from skillgate_core.agent.trajectory import span_report
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.policy.local_sampler import SamplingConfig
from skillgate_core.policy.sglang_client import SGLangClient
from skillgate_core.skills import read_slate, slate_skills_dir

FINAL = "Done: the workspace now holds the result the task asks for."


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def specs(bench, tmp_path_factory) -> list[EpisodeSpec]:
    skills_root = tmp_path_factory.mktemp("skills")
    out = []
    for row in load_bench_rows(bench, "train")[::4][:2]:  # two families
        slate = read_slate(bench / row["path"] / "skills.json")
        out.append(EpisodeSpec(load_task_package(bench / row["path"]), slate,
                               slate_skills_dir(bench / "skills", slate.names, skills_root / row["task_id"]),
                               bench=row["family"]))
    return out


def _logprobs(turn: int, n: int) -> list[float]:
    return [-round(0.05 + 0.01 * turn + 0.001 * i, 6) for i in range(n)]


class ScriptedSGLang:
    """/generate: each prompt is matched to its episode by its prompt ids; turn 0 reads the oracle
    skill, turn 1 answers. Checks that every later request extends the episode's token stream."""

    def __init__(self, tok, specs: list[EpisodeSpec]) -> None:
        self.tok, self.stop = tok, tok.convert_tokens_to_ids("<|im_end|>")
        self.prompts = [render_prompt_ids(tok, build_messages(DEFAULT_PROFILE, s.task.instruction, s.slate))
                        for s in specs]
        self.oracles = [s.slate.oracle for s in specs]
        self.turns = [[] for _ in specs]  # (input_ids, output ids) per served turn
        self.batches: list[int] = []

    def __call__(self, body):
        self.batches.append(len(body["input_ids"]))
        answer = []
        for ids, params in zip(body["input_ids"], body["sampling_params"], strict=True):
            (k,) = [i for i, p in enumerate(self.prompts) if ids[:len(p)] == p]
            history = self.turns[k]
            if history:  # nothing re-tokenized: the new context extends the old one by the sampled ids
                before, out = history[-1]
                assert ids[:len(before) + len(out)] == before + out, "context does not extend the last turn"
            assert params["max_new_tokens"] == 64 and params["temperature"] == 1.0 and params["top_p"] == 1.0
            text = first_read_turn(self.oracles[k]) if not history else FINAL
            out = turn_token_ids(self.tok, text)
            history.append((ids, out))
            answer.append({"text": text, "output_ids": out, "meta_info": {
                "finish_reason": {"type": "stop", "matched": self.stop}, "completion_tokens": len(out),
                "output_token_logprobs": [[lp, t, None] for lp, t in zip(_logprobs(len(history) - 1, len(out)), out,
                                                                          strict=True)]}})
        return answer


def test_sglang_policy_plays_real_episodes_keeping_server_ids_and_logprobs(tok, specs, bwrap_ready):
    script = ScriptedSGLang(tok, specs)
    with RecordedSGLang(generate=script) as server, SGLangClient(server.url, tok) as client:
        policy = SGLangPolicy(client, SamplingConfig(max_new_tokens=64))
        trajs = run_episodes(specs, policy, tok, EpisodeConfig(max_turns=4, max_new_tokens=64, backend="bwrap"))
    assert server.refusals == [] and script.batches == [2, 2]  # both episodes in one /generate call per turn
    for t, spec, served in zip(trajs, specs, script.turns, strict=True):
        assert (t.status, t.policy, t.backend) == ("completed", "sglang", "bwrap"), t.verifier_detail
        assert [turn.text for turn in t.turns] == [first_read_turn(spec.slate.oracle), FINAL]
        assert [turn.calls[0][0] for turn in t.turns if turn.calls] == ["read"]
        sampled = [(i, lp) for i, m, lp in zip(t.response_ids, t.loss_mask, t.logprobs, strict=True) if m]
        assert [i for i, _ in sampled] == served[0][1] + served[1][1]
        assert [lp for _, lp in sampled] == _logprobs(0, len(served[0][1])) + _logprobs(1, len(served[1][1]))
        assert all(math.isnan(lp) for i, m, lp in zip(t.response_ids, t.loss_mask, t.logprobs, strict=True) if not m)
        # the server's ids carry the selection span like the local sampler's
        spans = span_report(t, tok)
        assert spans["reads"] == ["oracle"] and spans["span_mismatch"] == spans["alignment_mismatch"] == 0

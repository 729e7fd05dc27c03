"""GRPO in server mode (rollout_source = "sglang") end to end, against a stand-in SGLang server.

The stand-in (a real local HTTP server speaking SGLang's format, tests/support/sglang_recorded_server.py)
holds a transformers copy of the policy: /update_weights_from_disk loads the folder the trainer
pushed, /generate plays the noisy skill-following teacher's turns (a tiny random model solves
nothing, so every group would be rejected) and reports each token's log-prob under the weights it
currently serves, as SGLang reports the log-probs of what it sampled. The trainer side is the real
one: DeepSpeed ZeRO-3 engine, real sandboxes, the push after every optimizer step.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from pathlib import Path

import torch
from support.sglang_recorded_server import RecordedSGLang

from skillgate_core.agent.episode import EpisodeSpec, EpisodeView
from skillgate_core.agent.policies import TeacherConfig, TeacherPolicy
from skillgate_core.base.paths import state_layout
from skillgate_core.ownership import experiment_dir, experiments_root
from skillgate_core.policy.local_sampler import sequence_logprobs
from skillgate_core.rl.data_prep import RLDataPrepConfig, prepare_rl_data
from skillgate_core.rl.grpo_config import GRPOConfig
from skillgate_core.rl.grpo_stage import train_grpo
from skillgate_core.rl.rl_tasks import load_rl_tasks

_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>", re.DOTALL)


class TeacherServer:
    """/generate and /update_weights_from_disk of the stand-in (see the module docstring)."""

    def __init__(self, model_dir: Path, rl_data: Path, bench: Path, scratch: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.tasks = load_rl_tasks(rl_data, bench, scratch)
        self.teacher = TeacherPolicy(self.tok, TeacherConfig(misleading_rate=0.5, seed=3))
        self.lock, self.repeats = threading.Lock(), itertools.count()
        self.loaded: list[str] = []
        self.served: list[tuple[int, int]] = []  # (pushes loaded so far, tokens) per answer

    def update(self, body):
        from transformers import AutoModelForCausalLM

        with self.lock:
            self.model = AutoModelForCausalLM.from_pretrained(body["model_path"]).eval()
            self.loaded.append(body["model_path"])
        return {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}

    def generate(self, body):
        return [self._turn(ids, params) for ids, params in zip(body["input_ids"], body["sampling_params"],
                                                                strict=True)]

    def _turn(self, ids: list[int], params: dict) -> dict:
        (task,) = [t for t in self.tasks if ids[:len(t.prompt_ids)] == list(t.prompt_ids)]
        turns = _TURN.findall(self.tok.decode(ids, skip_special_tokens=False))
        messages = [{"role": role, "content": content} for role, content in turns]
        view = EpisodeView(EpisodeSpec(task.task, task.slate, task.skills_dir, repeat=next(self.repeats)), messages,
                           list(ids), turn=sum(r == "assistant" for r, _ in turns), max_new_tokens=params["max_new_tokens"])
        (completion,) = self.teacher.act([view])
        out = list(completion.token_ids)[:params["max_new_tokens"]]
        with self.lock, torch.no_grad():
            logprobs = sequence_logprobs(self.model, ids, out, params["temperature"]).tolist()
            self.served.append((len(self.loaded), len(out)))
        stop = self.tok.convert_tokens_to_ids("<|im_end|>")
        finish = {"type": "stop", "matched": stop} if out[-1] == stop else {"type": "length", "length": len(out)}
        return {"text": self.tok.decode(out, skip_special_tokens=True), "output_ids": out,
                "meta_info": {"finish_reason": finish, "completion_tokens": len(out),
                              "output_token_logprobs": [[lp, t, None] for lp, t in zip(logprobs, out, strict=True)]}}


def test_grpo_server_mode_pushes_weights_after_every_step(bench, policy, tmp_path, skillgate_home, monkeypatch):
    from safetensors.torch import load_file

    rl_data = tmp_path / "rl"
    prepare_rl_data(RLDataPrepConfig(profile="selector_clean_oracle_action_credit", max_tasks=4),
                    {"bench": bench, "sft_model": policy}, rl_data)
    stand_in = TeacherServer(policy, rl_data, bench, tmp_path / "scratch")
    routes = {("POST", "/update_weights_from_disk"): stand_in.update}
    with RecordedSGLang(generate=stand_in.generate, routes=routes) as server:
        monkeypatch.setenv("SKILLGATE_SGLANG_URLS", server.url)  # the worker's configuration, not the run's
        # max_new_tokens: the teacher's turns are never cut, so its groups vary (oracle reads pass)
        config = GRPOConfig(steps=2, prompts_per_step=1, group_size=4, num_workers=1, launcher="process",
                            rollout_source="sglang",
                            max_turns=4, max_new_tokens=1024, learning_rate=1e-3, max_rejected_groups=8, force_after_groups=2,
                            force_after_samples=8, backend="bwrap", sandbox_workers=2)
        out = tmp_path / "out"
        out.mkdir()
        result = train_grpo(config, {"sft_model": policy, "rl_data": rl_data, "bench": bench}, out)
    assert server.refusals == []
    rows = [json.loads(line) for line in Path(result.metrics["metrics_file"]).read_text().splitlines()]
    trained = [r["step"] for r in rows if r["trained"]]
    assert [r["step"] for r in rows] == [0, 1] and trained, [{k: v for k, v in r.items() if "reject" in k}
                                                             for r in rows]
    # one push before the first rollout, one after every optimizer step; each followed by a cache flush
    tags = [f"step-{s:08d}" for s in [0] + [s + 1 for s in trained]]
    assert [Path(p).name for p in stand_in.loaded] == tags
    control = [(path, body) for _, path, body in server.requests if path != "/generate"]
    assert [p for p, _ in control] == ["/health"] + ["/update_weights_from_disk", "/flush_cache"] * len(tags)
    # rollouts of step k were served by the weights pushed before it
    assert {pushes for pushes, _ in stand_in.served} == set(range(1, len(trained) + 1)) | {1}
    # the servers end on exactly the weights the run exported; only the last push is kept on disk, in the
    # run's own segment
    exported = load_file(str(Path(result.outputs["policy_export"]) / "model.safetensors"))
    final = stand_in.model.state_dict()
    assert all(torch.equal(final[k], v) for k, v in exported.items())
    weights = experiment_dir(experiments_root(state_layout()), result.metrics["experiment_id"]).segment(
        result.metrics["run_name"]) / "sglang-weights"
    assert {Path(p).parent for p in stand_in.loaded} == {weights}
    assert [p.name for p in weights.iterdir()] == [tags[-1]]

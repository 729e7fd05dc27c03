"""Policies the episode loop can drive: a local transformers model, and the skill-following teacher.

- `LocalPolicy`: samples each active episode's next turn from an HF model in one batched call,
  keeping ids and log-probs (what GRPO trains on).
- `SGLangPolicy`: the same from SGLang servers (server mode): one /generate call for every active
  episode, each with its own token budget.
- `TeacherPolicy`: the embedded-default teacher for trajectory collection (docs/design.md, Embedded defaults): it plays the
  task's reference route through the real harness: first turn reads the oracle skill (with
  configurable selection noise: sometimes a misleading skill, sometimes none), second turn runs the
  procedure the skill it read prescribes, third turn answers. Its text is tokenized once, as
  demonstration data; it has no log-probs. Any OpenAI-compatible model can replace it (later step).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from skillgate_core.agent.episode import EpisodeView
from skillgate_core.base.config_ranges import NonNegativeInt, Probability, check_ranges
from skillgate_core.policy.local_sampler import Completion, SamplingConfig
from skillgate_core.policy.sglang_client import SGLangClient
from skillgate_core.skills import skill_location
from skillgate_core.skills.procedure import (
    extract_procedure,
    fill_step,
    is_stepped,
    printed_ticket,
    procedure_steps,
    task_work_order,
)

__all__ = [
    "TURN_END",
    "LocalPolicy",
    "SGLangPolicy",
    "TeacherConfig",
    "TeacherPolicy",
    "contradiction",
    "first_read_turn",
    "recovery_turn",
    "selection_reasoning",
    "task_cue",
    "turn_token_ids",
]

TURN_END = "<|im_end|>"
"""What ends an assistant turn in the ChatML template every policy here uses (a sampled token)."""

_OWNERS = itertools.count()


class LocalPolicy:
    """Batched sampling from a local model; each call advances the seed so turns differ.

    `sampling.sampler` picks the sampler: transformers generate (hf) or the static-cache compiled
    decode loop (static; the default on CUDA). Both return the same Completion contract.
    `static_sampler`: the model's StaticSampler (policy.static.sampler), which the trainer keeps for the
    whole run and hands to each step's policy; None: the policy makes its own on first static use.

    With the static sampler and `sampling.reuse_kv`, each episode keeps its KV cache rows in the sampler
    across its turns (`StaticSampler.sample_turns`, policy.static.turn_cache): the policy owns those rows (a
    new policy, e.g. the next GRPO step's after a weight sync, starts from none) and frees an episode's
    rows once its view says it ended. Where the installed transformers' StaticCache cannot be written at a
    chosen slot (TurnCache.supported), every turn prefills its whole context, as with reuse_kv off."""

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingConfig, name: str = "local",
                 static_sampler: Any = None) -> None:
        self.model, self.tokenizer, self.sampling, self.name = model, tokenizer, sampling, name
        self.static_sampler = static_sampler
        self._calls = 0
        self._owner = ("local-policy", next(_OWNERS))
        self._held: dict[int, Any] = {}
        """id(view) -> view, for the episodes whose rows the sampler holds (the view is kept, so its id is not reused)."""

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        # Each episode keeps its own budget, min(view.max_new_tokens, sampling.max_new_tokens), as in
        # SGLangPolicy: the batch samples to the longest one and each row is cut at its own limit, which is
        # exactly the sample a call with that row's limit would draw (the tokens before the cut are
        # unchanged), so an episode near its context limit no longer shortens the others' turns.
        budgets = [max(1, min(v.max_new_tokens, self.sampling.max_new_tokens)) for v in views]
        cfg = replace(self.sampling, max_new_tokens=max(budgets), seed=self.sampling.seed + self._calls)
        self._calls += 1
        # deferred: it imports torch (~2 s), which only a local model needs (not a plan, not the teacher)
        from skillgate_core.policy.static import StaticSampler, resolve_sampler, sample_batch

        static = resolve_sampler(cfg, self.model) == "static"
        if self.static_sampler is None and static:
            self.static_sampler = StaticSampler(self.model, self.tokenizer)
        completions = None
        if static and cfg.reuse_kv and self.static_sampler.turns.supported:
            try:
                completions = self._sample_turns(views, cfg)
            except (RuntimeError, ValueError, AssertionError, IndexError, TypeError) as err:
                # A turn-cache defect (first met on a new machine or transformers) must not end a training
                # run: the full prefill per turn is the reference path. The failure is counted
                # (turn_cache_failures in the step metrics) and said once; an error the plain sampler also
                # hits (a poisoned CUDA context, OOM) raises again from it below.
                self.static_sampler.turns.disable(f"{type(err).__name__}: {err}")
                self._held.clear()
                warnings.warn(f"turn cache switched off after: {type(err).__name__}: {err}; every turn now "
                              "prefills its whole context", RuntimeWarning, stacklevel=2)
        if completions is None:
            completions = sample_batch(self.model, self.tokenizer, [v.context_ids for v in views], cfg,
                                       static=self.static_sampler)
        return [self._cut(c, b) for c, b in zip(completions, budgets, strict=True)]

    def _sample_turns(self, views: Sequence[EpisodeView], cfg: SamplingConfig) -> list[Completion]:
        ended = [key for key, view in self._held.items() if getattr(view, "ended", False)]
        self.static_sampler.turns.release(ended)
        for key in ended:
            del self._held[key]
        self._held.update((id(v), v) for v in views)
        return self.static_sampler.sample_turns([id(v) for v in views], [v.context_ids for v in views], cfg,
                                                owner=self._owner)

    def cache_counters(self) -> dict[str, int]:
        """The sampler's turn-cache counters so far (policy.static.turn_cache.COUNTERS; all runs of the sampler,
        so take differences), empty without a static sampler."""
        return dict(self.static_sampler.turns.counters) if self.static_sampler is not None else {}

    def _cut(self, completion: Completion, budget: int) -> Completion:
        if len(completion.token_ids) <= budget:
            return completion
        ids = completion.token_ids[:budget]
        return replace(completion, token_ids=ids, logprobs=completion.logprobs[:budget],
                       text=self.tokenizer.decode(list(ids), skip_special_tokens=True), finish="length")


class SGLangPolicy:
    """Server-mode sampling: every active episode's next turn in one batched /generate call.

    Each episode keeps its own budget, min(view.max_new_tokens, sampling.max_new_tokens) (SGLang
    takes one sampling_params per prompt), so an episode near its context limit does not shorten
    the others' turns. Ids and log-probs are the server's (policy/sglang_client.py).
    """

    def __init__(self, client: SGLangClient, sampling: SamplingConfig, name: str = "sglang") -> None:
        self.client, self.sampling, self.name = client, sampling, name

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        budgets = [max(1, min(v.max_new_tokens, self.sampling.max_new_tokens)) for v in views]
        return self.client.generate([v.context_ids for v in views], self.sampling, max_new_tokens=budgets)


@dataclass(frozen=True)
class TeacherConfig:
    """How the teacher chooses what to read, and what it says about the choice."""

    misleading_rate: Probability = 0.0
    """Probability that the first turn reads a misleading skill instead of the oracle (and follows it)."""
    no_read_rate: Probability = 0.0
    """Probability that the first turn reads no skill at all (then it answers without acting)."""
    seed: NonNegativeInt = 0
    """Seed of the noise, combined with task id and repeat so every episode draws its own."""
    recovery_rate: Probability = 0.0
    """Probability that the first turn reads a misleading skill and the next one, having read its SKILL.md,
    says what in it contradicts the instruction and reads the oracle (then follows the oracle): the
    recovery a policy should learn. Exclusive of the two draws above (the three sum to at most 1)."""
    evidence: bool = True
    """The first turn's <skill_reasoning> states the evidence before naming the skill: the instruction's
    deciding fields (revision, consumer, scope, output; the task's [metadata.cue]) and that the oracle's
    description is the one matching all four (`selection_reasoning`). False, or a task without a cue:
    the one-line reason of earlier collections ("The skill X describes this exact procedure ...")."""

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.misleading_rate + self.no_read_rate + self.recovery_rate > 1:
            raise ValueError("misleading_rate, no_read_rate and recovery_rate must be >= 0 and sum to at most 1 "
                             "(they are exclusive draws)")


_RESPONSE = re.compile(r"<tool_response name='([^']*)'>(.*?)</tool_response>", re.DOTALL)
_CUE_FIELDS = ("revision", "consumer", "scope", "output")


def _call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "</tool_call>"


def task_cue(task: Any) -> dict[str, Any] | None:
    """A bundled task's openly stated context ([metadata.cue] of its task.toml: revision, consumer, scope,
    output), or None for a task without one (an imported Harbor task)."""
    cue = getattr(getattr(task, "config", None), "metadata", {}).get("cue")
    return dict(cue) if isinstance(cue, Mapping) and set(_CUE_FIELDS) <= set(cue) else None


def selection_reasoning(skill: str, cue: Mapping[str, Any] | None) -> str:
    """The teacher's reason for reading `skill` first: with a cue, the instruction's four deciding fields,
    then the skill; without, the one-line reason. The text before the name is the same for every
    candidate of a task, so the probe and DPO swap only the name (evaluation.probe, sft.baselines)."""
    if cue is None:
        return f"The skill {skill} describes this exact procedure, so I read it first."
    return (f"The task asks for revision {cue['revision']}, for the {cue['consumer']}, covering {cue['scope']}, "
            f"written to {cue['output']}. Its lookalikes each differ in one of these; the description that "
            f"matches all four is {skill}'s, so I read it first.")


def contradiction(body: str, cue: Mapping[str, Any] | None) -> str:
    """What in a read SKILL.md contradicts the task's cue, in words (the first of revision, consumer, scope
    and output it does not match); the bundled bodies state all four in their first lines."""
    if cue is None:
        return "does not match the task"
    found = re.search(r"\(revision (\d+)\)", body)
    if found and found.group(1) != str(cue["revision"]):
        return f"is revision {found.group(1)}, but the task asks for revision {cue['revision']}"
    if str(cue["consumer"]) not in body:
        return f"is not written for the {cue['consumer']}"
    if str(cue["scope"]) not in body:
        return f"does not cover {cue['scope']}"
    if f"`{cue['output']}`" not in body:
        return f"does not write {cue['output']}"
    return "does not match the task's revision, consumer, scope and output"


def first_read_turn(skill: str, reasoning: bool = True, cue: Mapping[str, Any] | None = None) -> str:
    """The teacher's first turn when it reads `skill`: optional <skill_reasoning> (`selection_reasoning`,
    with the task's `cue` when given), then one read call on /skills/SKILL/SKILL.md. The supervised
    selection baselines (sft.baselines) and the probe (evaluation.probe) score exactly this text."""
    call = _call("read", path=skill_location(skill))
    if not reasoning:
        return call
    return f"<skill_reasoning>{selection_reasoning(skill, cue)}</skill_reasoning>\n" + call


def recovery_turn(wrong: str, body: str, right: str, cue: Mapping[str, Any] | None) -> str:
    """The turn after reading the lookalike `wrong`: what in its SKILL.md contradicts the task, then the
    read of `right`."""
    return (f"<skill_reasoning>{wrong}'s SKILL.md {contradiction(body, cue)}: it is not this task's procedure. "
            f"{selection_reasoning(right, cue)}</skill_reasoning>\n" + _call("read", path=skill_location(right)))


def turn_token_ids(tokenizer: Any, text: str) -> list[int]:
    """A demonstration turn as the ids a policy would sample: the text, then the turn terminator."""
    return list(tokenizer(text + TURN_END, add_special_tokens=False)["input_ids"])


def _observations(view: EpisodeView) -> list[list[tuple[str, str]]]:
    """Per observation message so far: its (tool name, result JSON) pairs."""
    return [_RESPONSE.findall(m["content"]) for m in view.messages[2:] if m["role"] == "user"]


class TeacherPolicy:
    """The skill-following teacher (see the module docstring).

    Each turn is a pure function of the episode so far: turn 0 reads the drawn skill; after a read, a
    planned recovery reads the oracle, else the read SKILL.md's procedure starts (whole, or its first
    step with the instruction's work order); after a step, the next step with the ticket it printed;
    then the final answer."""

    def __init__(self, tokenizer: Any, config: TeacherConfig = TeacherConfig(), name: str = "teacher") -> None:
        self.tokenizer, self.config, self.name = tokenizer, config, name

    def _plan(self, view: EpisodeView) -> tuple[str | None, bool]:
        """(the skill the first turn reads, or None; whether the next turn recovers to the oracle)."""
        slate = view.spec.slate
        if slate is None:
            return None, False
        rng = random.Random(f"teacher:{self.config.seed}:{view.spec.task.task_id}:{view.spec.repeat}")
        draw = rng.random()
        c = self.config
        if draw < c.no_read_rate:
            return None, False
        misleading = [e.name for e in slate.entries if e.category == "misleading"]
        if draw < c.no_read_rate + c.misleading_rate and misleading:
            return rng.choice(misleading), False
        if draw < c.no_read_rate + c.misleading_rate + c.recovery_rate and misleading and slate.oracle:
            return rng.choice(misleading), True
        return slate.oracle, False

    def _turn_text(self, view: EpisodeView) -> str:
        cue = task_cue(view.spec.task) if self.config.evidence else None
        skill, recovers = self._plan(view)
        if view.turn == 0:
            if skill is None:
                return "<skill_reasoning>No listed skill is needed here.</skill_reasoning>\nI have nothing to add."
            return first_read_turn(skill, cue=cue)
        history = _observations(view)
        last = history[-1] if history else []
        reads = [json.loads(result).get("content", "") for obs in history for tool, result in obs if tool == "read"]
        if last and last[0][0] == "read":
            content = json.loads(last[0][1]).get("content", "")
            oracle = view.spec.slate.oracle if view.spec.slate is not None else None
            if recovers and len(reads) == 1 and oracle:
                return recovery_turn(str(skill), content, oracle, cue)
            return self._first_step(view, content)
        if last and last[0][0] == "exec" and reads:
            procedure = extract_procedure(reads[-1]) or ""
            steps = procedure_steps(procedure) if is_stepped(procedure) else []
            read_at = max(i for i, obs in enumerate(history) if any(tool == "read" for tool, _ in obs))
            done = sum(tool == "exec" for obs in history[read_at + 1:] for tool, _ in obs)
            if done < len(steps):
                ticket = printed_ticket(last[0][1])
                return (f"Step {done + 1} of {len(steps)}, with the ticket step {done} printed.\n"
                        + _call("exec", command=fill_step(steps[done], None, ticket)))
        return "Done: the workspace now holds the result the task asks for."

    def _first_step(self, view: EpisodeView, skill_md: str) -> str:
        procedure = extract_procedure(skill_md)
        if not procedure:
            return "Done: the workspace now holds the result the task asks for."
        if not is_stepped(procedure):
            return "I will follow the skill's procedure step by step.\n" + _call("exec", command=procedure)
        steps = procedure_steps(procedure)
        order = task_work_order(view.spec.task.instruction)
        return (f"Step 1 of {len(steps)}, with the task's work order.\n"
                + _call("exec", command=fill_step(steps[0], order, None)))

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        out = []
        for view in views:
            text = self._turn_text(view)
            out.append(Completion(tuple(turn_token_ids(self.tokenizer, text)), (), text, "stop"))
        return out

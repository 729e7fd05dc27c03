"""The episode loop (docs/method.md 2): prompt -> assistant turn -> tool calls -> one observation -> ... -> grade.

Episodes run in lockstep batches so a token-level policy generates every active episode's next turn
in one batched call (a GRPO group is one batch). Everything the sampler produced is kept as token
ids; observations are appended as their own ids with loss mask 0:

    response ids = [turn 0 sampled ids (mask 1, ends with <|im_end|>)]
                   ["\\n<|im_start|>user\\n" + observation + "<|im_end|>\\n<|im_start|>assistant\\n" (mask 0)]
                   [turn 1 sampled ids (mask 1)] ...

so nothing is ever re-tokenized (the "\\n" the chat template puts after <|im_end|> is observation
glue, never a sampled token). A turn with no tool call is the final answer; a turn cut by length,
the token budget, the turn limit or the wall clock makes the episode TRUNCATED (still graded); a
sandbox failure makes it ABORTED. At its end every process the agent left in its sandbox is killed,
so it is graded on the workspace as it was then, not on what a background job wrote while the batch
played on. Observations are encoded as plain text (`observation_ids`): a special-token string in a
file stays text. One episode's turn that raises while being handled (what its sampled text reached)
ends that episode alone, TRUNCATED and graded, flagged `turn_error` in Trajectory.extra. Anything else
that raises (the policy, the verifier, Ctrl-C) ends the whole batch, and every sandbox it started is
stopped first (envs/sandbox_group.py), commands still running in them included: no container,
bubblewrap session or cgroup outlives the call.

    trajectories = run_episodes(specs, policy, tokenizer, EpisodeConfig(max_turns=8))

Lockstep means a batch's tools wait for its generation and the other way round. Sandbox starts and grading
need not: the sandboxes start while the first turn is generated (its prompts need none), and an episode that
has ended is graded while the others play on (EpisodeConfig.overlap_sandbox; the turns sampled are the same).
`run_episode_batches`
runs several batches at once (lanes), each through `run_episodes`, sharing one policy through
`SerializedPolicy` (one `act` at a time: a GPU sampler serves one batch per call): while one lane
generates, the others run their tool calls, sandbox starts and verifiers, so sandbox work overlaps
generation instead of waiting for it (merge=True: turns that queued meanwhile are generated together).

    per_batch = run_episode_batches([group0, group1, ...], policy, tokenizer, config, lanes=4)
"""

from __future__ import annotations

import copy
import math
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillgate_core.agent.prompts import DEFAULT_PROFILE, PromptProfile, build_messages, render_prompt_ids
from skillgate_core.agent.tools import ToolBox, ToolResult, format_observation
from skillgate_core.agent.trajectory import Trajectory, TurnRecord
from skillgate_core.base.config_ranges import PositiveFloat, PositiveInt, check_ranges
from skillgate_core.credit.actions import SkillOpen
from skillgate_core.envs.backend_registry import BACKENDS, Backend, is_backend
from skillgate_core.envs.backends import reap_orphans, start_sandbox
from skillgate_core.envs.sandbox import Sandbox, SandboxError
from skillgate_core.envs.sandbox_config import SandboxConfig
from skillgate_core.envs.sandbox_group import SandboxGroup
from skillgate_core.envs.task_package import TaskPackage
from skillgate_core.envs.verifier import EpisodeStatus, aborted, verify
from skillgate_core.formats.tool_calls import parse_tool_calls
from skillgate_core.policy.local_sampler import Completion
from skillgate_core.skills import Slate

__all__ = [
    "ENV_PHASES",
    "OBSERVATION_TEMPLATE",
    "EpisodeConfig",
    "EpisodeSpec",
    "EpisodeView",
    "Policy",
    "SerializedPolicy",
    "observation_ids",
    "plain_text_tokenizer",
    "run_episode_batches",
    "run_episodes",
]

OBSERVATION_TEMPLATE = "\n<|im_start|>user\n{observation}<|im_end|>\n<|im_start|>assistant\n"
"""Glue after a sampled `<|im_end|>`: the observation message and the next assistant header (mask 0)."""


# A declaration, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class EpisodeConfig:
    """Limits of one episode (docs/method.md 2; seed values as defaults where they exist)."""

    max_turns: PositiveInt = 30
    """Assistant turns before the episode is cut (TRUNCATED)."""
    max_context_tokens: PositiveInt = 16384
    """Prompt + response tokens the episode may use."""
    max_new_tokens: PositiveInt = 1024
    """Longest single assistant turn."""
    wall_clock_s: PositiveFloat = 850.0
    """Seconds from sandbox start to the end of the last turn."""
    backend: Backend = "auto"
    """Sandbox backend: auto or one of envs/backend_registry.py."""
    tool_output_chars: PositiveInt = 16000
    """Tool output beyond this keeps head and tail around an omitted-count marker."""
    workers: PositiveInt = 4
    """Threads running sandboxes (tool calls, starts, verification) concurrently."""
    overlap_sandbox: bool = True
    """Start the sandboxes while the first turn is generated, and grade each episode as soon as it ends
    while the others play on. The turns sampled are the same either way (an episode's first turn never
    needs its sandbox), except that an episode whose sandbox fails to start is in the first batch and then
    drops its turn. False: every sandbox starts before the first turn, every episode is graded at the end."""

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run."""

    task: TaskPackage
    """The task package."""
    slate: Slate | None
    """The skills shown, in order (None = no-skill condition)."""
    skills_dir: Path | None = None
    """Folder mounted read-only at /skills (a frozen snapshot); required when slate is set."""
    bench: str = ""
    """Benchmark name (recorded)."""
    repeat: int = 0
    """Index of this episode among the task's repeats (group member index)."""
    prompt_ids: tuple[int, ...] | None = None
    """The prompt's token ids as rl-data-prep rendered them once; None renders them here from the
    same messages with the tokenizer's chat template."""


@dataclass
class EpisodeView:
    """What a policy sees of one active episode."""

    spec: EpisodeSpec
    """The episode being played."""
    messages: list[dict[str, str]]
    """The conversation so far (system, user, assistant, user observations...)."""
    context_ids: list[int]
    """Prompt + response ids so far, ending with the assistant header."""
    turn: int
    """Index of the turn to generate."""
    max_new_tokens: int
    """Tokens this turn may use."""
    ended: bool = False
    """Set once the episode has played its last turn: a policy that keeps state per episode (the KV
    cache rows of LocalPolicy's sampler) may drop it."""


class Policy(Protocol):
    """Produces the next assistant turn of each active episode (batched)."""

    name: str

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]: ...


@dataclass
class _Live:
    spec: EpisodeSpec
    box: Sandbox | None
    tools: ToolBox | None
    view: EpisodeView
    prompt_len: int
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    skill_opens: list[SkillOpen] = field(default_factory=list)
    skill_consults: list[SkillOpen] = field(default_factory=list)
    status: EpisodeStatus | None = None
    abort_detail: str = ""
    turn_error: str = ""
    deadline: float = 0.0
    started: float = 0.0
    served_prompt: int | None = None
    """A served policy without a local tokenizer: the server's count of the prompt (first request)."""
    served_context: int = 0
    """The same: the server's count of the context after the latest turn (that request's context + the turn)."""


def _new_live(spec: EpisodeSpec, tokenizer: Any, profile: PromptProfile, config: EpisodeConfig) -> _Live:
    """The episode before its sandbox: its prompt is all its first turn needs."""
    messages = build_messages(profile, spec.task.instruction, spec.slate)
    if spec.prompt_ids is not None:
        prompt_ids = list(spec.prompt_ids)
    else:
        prompt_ids = render_prompt_ids(tokenizer, messages)
    view = EpisodeView(spec, messages, list(prompt_ids), 0, config.max_new_tokens)
    started = time.monotonic()
    return _Live(spec, None, None, view, len(prompt_ids), started=started, deadline=started + config.wall_clock_s)


def _start_box(live: _Live, config: EpisodeConfig, sandbox_config: SandboxConfig | None, group: SandboxGroup) -> None:
    """Start the episode's sandbox; one that does not start makes the episode ABORTED."""
    try:
        live.box = group.add(start_sandbox(live.spec.task, backend=_backend(config.backend),
                                           skills_dir=live.spec.skills_dir, config=sandbox_config))
        live.tools = ToolBox(live.box, output_chars=config.tool_output_chars)
    except SandboxError as exc:
        live.status, live.abort_detail = EpisodeStatus.ABORTED, f"sandbox did not start: {exc}"


def _backend(name: str) -> Backend:
    if not is_backend(name):
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    return name


def _append(live: _Live, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None) -> None:
    live.response_ids.extend(ids)
    live.loss_mask.extend([mask] * len(ids))
    live.logprobs.extend(logprobs if logprobs is not None else [math.nan] * len(ids))
    live.view.context_ids.extend(ids)


def _step(live: _Live, completion: Completion, tokenizer: Any, config: EpisodeConfig) -> None:
    """Record one sampled turn, run its calls, append the observation (or end the episode)."""
    if completion.error:  # the policy produced no turn (a served model's endpoint failed)
        live.status, live.abort_detail = EpisodeStatus.ABORTED, f"policy failed: {completion.error}"
        return
    start = len(live.response_ids)
    lp = completion.logprobs if len(completion.logprobs) == len(completion.token_ids) else None
    _append(live, completion.token_ids, 1, lp)
    if completion.context_tokens is not None:  # counted by the server (no local ids for prompt or observations)
        live.served_prompt = completion.context_tokens if live.served_prompt is None else live.served_prompt
        live.served_context = completion.context_tokens + len(completion.token_ids)
    live.view.messages.append({"role": "assistant", "content": completion.text})
    parsed = parse_tool_calls(completion.text)
    finish = completion.finish
    ended_by_budget = time.monotonic() >= live.deadline
    if finish == "length" or ended_by_budget:
        live.turns.append(TurnRecord(completion.text, start, len(live.response_ids),
                                     "length" if finish == "length" else "budget", ()))
        live.status = EpisodeStatus.TRUNCATED
        return
    if parsed.is_final:
        live.turns.append(TurnRecord(completion.text, start, len(live.response_ids), "stop", ()))
        live.status = EpisodeStatus.COMPLETED
        return
    assert live.tools is not None
    results: list[ToolResult] = live.tools.run_all(parsed.calls, deadline=live.deadline)
    turn_index = len(live.turns)
    for call_index, result in enumerate(results):  # each skill open with the call that ran it (docs/reads.md)
        live.skill_opens += [SkillOpen(name, None, None) for name in result.opened_before]
        live.skill_opens += [SkillOpen(name, turn_index, call_index) for name in result.opened]
        live.skill_consults += [SkillOpen(name, None, None) for name in result.consulted_before]
        live.skill_consults += [SkillOpen(name, turn_index, call_index) for name in result.consulted]
    errors = [ToolResult(name="tool_call", ok=False, error=e) for e in parsed.errors]
    dispatched = tuple(c.key() for c in parsed.calls)
    live.turns.append(TurnRecord(completion.text, start, len(live.response_ids), "stop", dispatched,
                                 sum(not r.ok for r in results) + len(errors)))
    observation = format_observation([*results, *errors], limit=config.tool_output_chars)
    live.view.messages.append({"role": "user", "content": observation})
    _append(live, observation_ids(tokenizer, observation), 0, None)
    live.view.turn += 1
    room = config.max_context_tokens - max(len(live.view.context_ids), live.served_context)
    if live.view.turn >= config.max_turns or room <= 0 or time.monotonic() >= live.deadline:
        live.status = EpisodeStatus.TRUNCATED
    live.view.max_new_tokens = max(1, min(config.max_new_tokens, room))


def observation_ids(tokenizer: Any, observation: str) -> list[int]:
    """OBSERVATION_TEMPLATE's ids around `observation`: the template's own special tokens as such, the
    observation always as plain text. Tool output is whatever a file or command held: a file holding
    `<|im_end|>\n<|im_start|>assistant` would otherwise become those special tokens in the policy's
    context (a forged turn boundary the policy is trained on)."""
    head, tail = OBSERVATION_TEMPLATE.split("{observation}")
    body = plain_text_tokenizer(tokenizer)(observation, add_special_tokens=False)["input_ids"]
    return [*tokenizer(head, add_special_tokens=False)["input_ids"], *body,
            *tokenizer(tail, add_special_tokens=False)["input_ids"]]


_PLAIN_TEXT: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_PLAIN_TEXT_LOCK = threading.Lock()


def plain_text_tokenizer(tokenizer: Any) -> Any:
    """A copy of `tokenizer` (made once per tokenizer) that never parses special tokens: for text the agent
    controls. HF fast tokenizers keep "parse special tokens or not" as ONE mutable flag on the Rust tokenizer,
    set by every call (`split_special_tokens`). Lanes encode observations and chat headers from several
    threads at once, so on a shared tokenizer one thread's call flips the flag under another's: a header came
    out as plain characters, and tool output holding `<|im_end|>` as the special token, a forged turn boundary
    (tests/agent/test_observation_tokens.py). Nothing calls the copy without splitting, and nothing calls the
    original with it, so neither flag ever changes."""
    with _PLAIN_TEXT_LOCK:
        plain = _PLAIN_TEXT.get(tokenizer)
        if plain is None:
            plain = copy.deepcopy(tokenizer)
            plain.split_special_tokens = True
            _PLAIN_TEXT[tokenizer] = plain
        return plain


def _stop_agent(live: _Live) -> None:
    """At the episode's end (final answer, or cut): kill every process the agent still has in its sandbox
    (Docker background jobs, setsid/nohup daemons), so the workspace graded is the one it left then,
    not what a job wrote while the rest of the batch played on. SandboxError: the episode is ABORTED."""
    if live.box is not None and live.status in (EpisodeStatus.COMPLETED, EpisodeStatus.TRUNCATED):
        live.box.kill_processes()


def _record_opens_after_calls(live: _Live) -> None:
    """Skills read and consulted after the last call (a background job): no call's."""
    if live.box is not None:
        opened = live.box.drain_skill_opens()
        live.skill_opens += [SkillOpen(name, None, None) for name in opened.read]
        live.skill_consults += [SkillOpen(name, None, None) for name in opened.consulted]


def _finish(live: _Live, policy: Policy, profile: PromptProfile, group: SandboxGroup) -> Trajectory:
    spec = live.spec
    status = live.status or EpisodeStatus.TRUNCATED
    backend = live.box.backend if live.box is not None else ""
    _record_opens_after_calls(live)  # before grading: the verifier's opens are not the agent's
    try:
        if live.box is None:
            grade = aborted(live.abort_detail or "no sandbox")
        elif status is EpisodeStatus.ABORTED:
            grade = aborted(live.abort_detail)
        else:
            grade = verify(live.box, spec.task, status)
    finally:
        if live.box is not None:
            group.stop(live.box)
    slate = spec.slate
    return Trajectory(
        task_id=spec.task.task_id,
        bench=spec.bench,
        repeat=spec.repeat,
        policy=policy.name,
        prompt_profile=profile.name,
        slate_names=tuple(e.name for e in slate.entries) if slate else (),
        slate_categories=tuple(e.category for e in slate.entries) if slate else (),
        gold=slate.oracle if slate else None,
        messages=tuple(live.view.messages),
        prompt_ids=tuple(live.view.context_ids[: live.prompt_len]),
        response_ids=tuple(live.response_ids),
        loss_mask=tuple(live.loss_mask),
        logprobs=tuple(live.logprobs),
        turns=tuple(live.turns),
        status=str(grade.status),
        score=grade.score,
        raw_score=grade.raw_score,
        missing_reward=grade.missing_reward,
        verifier_detail=grade.detail,
        backend=backend,
        duration_s=round(time.monotonic() - live.started, 3),
        extra=_extra(live),
        skill_opens=tuple(live.skill_opens),
        skill_consults=tuple(live.skill_consults),
    )


def _extra(live: _Live) -> dict[str, Any]:
    """Flags of how the episode went: a turn whose handling failed (turn_error); token counts taken from
    a served policy's usage (endpoint_usage: the server's prompt and final context counts); the sandbox's
    container stopping by itself and being replaced, e.g. by an OOM kill of its first process the
    agent arranged (sandbox_restarts: why each one, Docker only)."""
    extra: dict[str, Any] = {"turn_error": live.turn_error} if live.turn_error else {}
    if live.served_prompt is not None:  # counted from the endpoint's usage (agent/openai_policy.py)
        extra["endpoint_usage"] = {"prompt_tokens": live.served_prompt, "context_tokens": live.served_context}
    restarts = list(getattr(live.box, "agent_restarts", None) or [])
    if restarts:
        extra["sandbox_restarts"] = restarts
    return extra


def run_episodes(
    specs: Sequence[EpisodeSpec],
    policy: Policy,
    tokenizer: Any,
    config: EpisodeConfig = EpisodeConfig(),
    profile: PromptProfile = DEFAULT_PROFILE,
    sandbox_config: SandboxConfig | None = None,
    phase_seconds: dict[str, float] | None = None,
) -> list[Trajectory]:
    """Play every spec to the end in lockstep turns and grade it; results in spec order.

    If anything raises, every sandbox started is stopped before the error propagates (module docstring).
    Sandboxes a killed earlier run left behind (owner process gone) are reaped first. `phase_seconds`, when
    given, gains the wall seconds the loop waited on each sandbox phase (ENV_PHASES: starts, the turns' tool calls,
    verification), added to what it holds: where a rollout's non-generate time goes. With
    `config.overlap_sandbox` (the default) starts and verification mostly run while turns generate, and only
    the wait left over counts.
    """
    reap_orphans(sandbox_config)
    group = SandboxGroup()
    pool = ThreadPoolExecutor(max_workers=max(1, config.workers))
    lives: list[_Live] = []
    try:
        lives = [_new_live(s, tokenizer, profile, config) for s in specs]
        starting = [pool.submit(_start_box, live, config, sandbox_config, group) for live in lives]
        if not config.overlap_sandbox:
            with _timed(phase_seconds, "start"):
                _wait_all(starting)
            starting = []
        finishing: dict[int, Future[Trajectory]] = {}

        def finish_ended() -> None:  # each episode graded on the pool once it has ended, while the rest play on
            for i, live in enumerate(lives):
                if live.status is not None and i not in finishing:
                    finishing[i] = pool.submit(_finish, live, policy, profile, group)
            _raise_first(finishing.values())

        while True:
            # overlap: the first turn is generated while the sandboxes start (its prompts need none); an
            # episode whose sandbox then fails to start drops its turn and is ABORTED as before
            active = [lv for lv in lives if lv.status is None]
            if not active:
                break
            completions = policy.act([lv.view for lv in active])
            if len(completions) != len(active):
                raise RuntimeError(f"policy {policy.name} returned {len(completions)} turns for {len(active)} episodes")
            if starting:
                with _timed(phase_seconds, "start"):
                    _wait_all(starting)
                starting = []
                active, completions = _started(active, completions)

            def advance(pair: tuple[_Live, Completion]) -> None:
                live, completion = pair
                try:
                    try:
                        _step(live, completion, tokenizer, config)
                    except (SandboxError, OSError):
                        raise
                    except Exception as exc:
                        # Handling this episode's turn failed (something its sampled text reached that
                        # nothing foresaw): that episode ends, graded on the workspace it left, flagged;
                        # its neighbours in the batch play on (a GRPO step or an evaluation is not lost).
                        live.status = EpisodeStatus.TRUNCATED
                        live.turn_error = f"{type(exc).__name__}: {exc}"[:500]
                    _stop_agent(live)
                except (SandboxError, OSError) as exc:
                    live.status, live.abort_detail = EpisodeStatus.ABORTED, f"sandbox failed: {exc}"

            with _timed(phase_seconds, "tools"):
                _each(pool, advance, zip(active, completions, strict=True))
            for live in active:
                live.view.ended = live.status is not None
            if config.overlap_sandbox:
                finish_ended()
        if starting:  # no first turn played (no specs, or every start failed before it): starts end before grading
            _wait_all(starting)
        with _timed(phase_seconds, "verify"):
            finish_ended()
            _wait_all(list(finishing.values()))
            return [finishing[i].result() for i in range(len(lives))]
    finally:
        for live in lives:
            live.view.ended = True
        # Stop first: it also kills commands still running on the pool's threads, so the shutdown
        # below does not wait for them; a start finishing after this is stopped as it registers.
        group.stop_all()
        pool.shutdown(wait=True, cancel_futures=True)


def _started(active: list[_Live], completions: list[Completion]) -> tuple[list[_Live], list[Completion]]:
    """The episodes of the first turn whose sandbox started, with their turns (the others were ABORTED)."""
    kept = [(lv, c) for lv, c in zip(active, completions, strict=True) if lv.status is None]
    return [lv for lv, _ in kept], [c for _, c in kept]


def _wait_all(futures: list[Future[Any]]) -> None:
    """Wait for every future; the first error is raised as soon as it happens."""
    wait(futures, return_when=FIRST_EXCEPTION)
    _raise_first(futures)


def _raise_first(futures: Iterable[Future[Any]]) -> None:
    for future in futures:
        if future.done() and future.exception() is not None:
            raise future.exception()  # type: ignore[misc]  # not None: checked on the line above


ENV_PHASES = ("start", "tools", "verify")
"""run_episodes' sandbox phases, in order: sandbox starts; each turn's tool calls (with the turn's bookkeeping);
verification (and the sandboxes' stop). Timed as the loop's wait on each: with overlap, the start still running
after the first turn's generation, and the verification still running after the last turn."""


@contextmanager
def _timed(into: dict[str, float] | None, phase: str) -> Iterator[None]:
    """Adds the block's wall seconds to `into[phase]` (nothing when `into` is None)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        if into is not None:
            into[phase] = into.get(phase, 0.0) + time.perf_counter() - start


def _each(pool: ThreadPoolExecutor, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """`fn` over `items` on the pool, results in order; the first error is raised as soon as it
    happens (pool.map would first wait for every earlier item, e.g. another episode's long command)."""
    futures = [pool.submit(fn, item) for item in items]
    _wait_all(futures)
    return [future.result() for future in futures]


class SerializedPolicy:
    """`policy` shared by several threads: one `act` at a time, every call on the same thread (CUDA-graph
    replays and compiled code keep per-thread state: they see one caller), in the order asked.

    merge=True: the turns that queued up while the policy was busy are generated together in the next
    call (one batch of all their views, the results split back): a GPU sampler does 4 batches of 8 in
    about the time of one, so lanes then share decode steps instead of taking turns. The policy's
    own per-call state (LocalPolicy's seed counter) then depends on how the calls happened to group,
    so sampling is no longer a function of the seed alone: off by default.
    `busy` holds the (start, end) time.monotonic() span of each call and `call_sizes` its views."""

    def __init__(self, policy: Policy, merge: bool = False) -> None:
        self.policy, self.name, self.merge = policy, policy.name, merge
        self.busy: list[tuple[float, float]] = []
        self.call_sizes: list[int] = []
        self._queue: queue.SimpleQueue[tuple[Any, Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="policy", daemon=True)
        self._thread.start()

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        future: Future[list[Completion]] = Future()
        self._queue.put((list(views), future))
        return future.result()

    def run(self, fn: Callable[[], Any]) -> Any:
        """fn() on the policy thread, between two calls (a warm-up of the policy's compiled code, say)."""
        future: Future[Any] = Future()
        self._queue.put((fn, future))
        return future.result()

    def _take(self) -> list[tuple[Any, Future[Any]]] | None:
        first = self._queue.get()
        if first is None:
            return None
        taken = [first]
        while self.merge and not callable(first[0]):
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is None or callable(more[0]):
                self._queue.put(more)  # served after this call (a stop: after everything queued)
                break
            taken.append(more)
        return taken

    def _serve(self) -> None:
        while (taken := self._take()) is not None:
            if callable(taken[0][0]):
                fn, future = taken[0]
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
                continue
            views = [v for vs, _ in taken for v in vs]
            start = time.monotonic()
            try:
                out = self.policy.act(views)
                if len(out) != len(views):
                    raise RuntimeError(f"policy {self.name} returned {len(out)} turns for {len(views)} episodes")
            except BaseException as exc:  # handed to every waiting caller; this thread keeps serving
                for _, future in taken:
                    future.set_exception(exc)
            else:
                at = 0
                for vs, future in taken:
                    future.set_result(out[at : at + len(vs)])
                    at += len(vs)
            finally:
                self.busy.append((start, time.monotonic()))
                self.call_sizes.append(len(views))

    def close(self) -> None:
        """End the policy thread (after the calls already asked for)."""
        self._queue.put(None)
        self._thread.join()


def run_episode_batches(
    batches: Sequence[Sequence[EpisodeSpec]],
    policy: Policy,
    tokenizer: Any,
    config: EpisodeConfig = EpisodeConfig(),
    profile: PromptProfile = DEFAULT_PROFILE,
    sandbox_config: SandboxConfig | None = None,
    lanes: int = 2,
    merge: bool = False,
) -> list[list[Trajectory]]:
    """`run_episodes` over each batch, `lanes` batches at a time sharing `policy` (wrapped in a
    SerializedPolicy(policy, merge) unless it is one): see the module docstring. Results per batch,
    in order.

    Each lane stops its own sandboxes on any error (run_episodes); the first error is raised once the
    lanes already running have ended, and batches not yet started are not started."""
    if lanes < 1:
        raise ValueError("lanes must be >= 1")
    shared = policy if isinstance(policy, SerializedPolicy) else SerializedPolicy(policy, merge=merge)
    try:
        with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="episode-lane") as pool:
            futures = [pool.submit(run_episodes, batch, shared, tokenizer, config, profile, sandbox_config)
                       for batch in batches]
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                for future in futures:
                    future.cancel()
                pool.shutdown(wait=True)
                raise failed.exception()  # type: ignore[misc]  # not None: chosen for having one
            return [future.result() for future in futures]
    finally:
        if shared is not policy:
            shared.close()

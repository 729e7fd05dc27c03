"""The evaluation runner: a policy x a protocol -> repeats x tasks trials, owned, resumable.

    ref = resolve_policy("path/to/policy_export", root=root)          # evaluation/owner.py
    resolved = build_protocol(load_spec("eval70_v1"), bench)          # evaluation/specs.py
    result = run_evaluation(resolved, ref, EvalRunConfig(batch_episodes=16))
    result.status, result.summary["trial_success"], result.parquet

1. Identity: the protocol is registered (SKILLGATE_HOME/protocols/PROTOCOL_ID.json) and the
   evaluation is experiments/EXP/eval/EVAL_ID with EVAL_ID = EXPORT_ID__PROTOCOL_ID[__TAG], owned
   by the experiment that owns the model (ownership.evals). An existing evaluation recorded under
   another fingerprint is refused with both fingerprints named.
2. Trials: task-major order, trial_index = task_index * repeats + repeat; each trial samples with
   its own seed (trials.trial_seed: protocol seed, task, repeat), so it does not matter which
   trials share a lockstep batch. Batches of `batch_episodes` run through agent.episode.run_episodes
   in real sandboxes with the protocol's limits, the skills mounted from a verified frozen snapshot.
3. Rows: each graded trial is published as rows/ROW_ID/row.json (+ trajectory.json, the per-trial
   log) as soon as its batch ends. A trial aborted by an infrastructure failure (the endpoint did
   not answer, a sandbox died) is not the policy's trial: it gets no row, one line in aborted.jsonl
   (ABORTED_FILE: row id, attempt, error) and is played again by the next attempt. Resuming an
   evaluation (incomplete, failed, or its process killed) plays only the trials without a row (an
   aborted row published before 2026-12-08, when aborts still got rows, stays). When every trial has a row:
   eval_trials.parquet and summary.json in the evaluation folder, status completed.
4. Status: running -> completed | incomplete (stopped on purpose: max_trials, Ctrl-C, SIGTERM, a cancel; or
   some trials aborted) | failed (an error; `stop_after_errors` trials aborted in a row stop the
   attempt at once with TrialsAbortedInARow: a dead endpoint fails 16 trials in seconds and 280 in
   minutes). The observer (evaluation/observer.py) hears about every step; the progress bar counts
   the resolved and the aborted trials of the attempt.
"""

from __future__ import annotations

import hashlib
import json
import signal
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, EpisodeView, Policy, run_episodes
from skillgate_core.agent.trajectory import Trajectory
from skillgate_core.base.atomic import atomic_write_json, atomic_write_text
from skillgate_core.base.config_ranges import NonNegativeInt, PositiveInt, check_ranges
from skillgate_core.base.interrupts import SignalStop, cancellation, interrupt_signal
from skillgate_core.base.paths import state_layout
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.context_limit import context_warning, model_context_limit
from skillgate_core.evaluation.observer import EvalInfo, EvalObserver, current_observer
from skillgate_core.evaluation.owner import PolicyRef
from skillgate_core.evaluation.protocol import ProtocolConflictError, check_pinned_id, register_protocol
from skillgate_core.evaluation.specs import ResolvedProtocol
from skillgate_core.evaluation.trials import (
    TrialContext,
    row_id,
    summarize_rows,
    trial_row,
    trial_seed,
    write_trials,
)
from skillgate_core.ownership import (
    EvalRecord,
    experiment_dir,
    finish_eval,
    list_eval_rows,
    load_eval,
    reopen_eval,
    start_eval,
    write_eval_row,
)
from skillgate_core.ownership.layout import check_name
from skillgate_core.skills import slate_skills_dir, snapshot_skills

__all__ = ["ABORTED_FILE", "PARQUET_FILE", "SUMMARY_FILE", "EvalResult", "EvalRunConfig", "StopRequested",
           "TrialsAbortedInARow", "eval_id_for", "run_evaluation", "token_counts"]

PARQUET_FILE = "eval_trials.parquet"
SUMMARY_FILE = "summary.json"
TRAJECTORY_FILE = "trajectory.json"
ABORTED_FILE = "aborted.jsonl"
"""One JSON line per aborted trial (row_id, trial_index, attempt, error, seconds): never a row."""


@dataclass(frozen=True)
class EvalRunConfig:
    """How to run an evaluation (none of it changes the protocol: rows stay comparable)."""

    batch_episodes: PositiveInt = 8
    """Episodes played together in one lockstep batch (in flight at once)."""
    sandbox_workers: PositiveInt = 4
    """Threads running sandbox work (starts, tool calls, verification) concurrently."""
    tag: str = ""
    """Tag appended to the evaluation id ('' for none; the nightly uses nightly-YYYY-MM-DD)."""
    method: str = ""
    """Row label ('' = the export id, or the served model name)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where a local model runs (auto: cuda when available)."""
    cpu_threads: NonNegativeInt = 1
    """torch intra-op threads when the model runs on CPU (0 = torch's default). 1 is fastest for small
    models on a loaded machine (measured here: 50x faster than 2 threads at load 20 on 2 cores)."""
    max_trials: NonNegativeInt = 0
    """Stop (status incomplete) once this many trials ran in this call (0 = run them all)."""
    stop_after_errors: NonNegativeInt = 8
    """Stop the attempt (status failed, TrialsAbortedInARow) once this many trials in a row aborted on an
    infrastructure failure (0 = never stop early): a dead endpoint is named after one batch, not 280
    trials later. Isolated aborts never stop it; they are replayed by the next attempt."""
    pin: str = ""
    """A protocol id the run must have (e.g. the one earlier rows carry); another id is refused."""
    tokenizer: str = ""
    """HF tokenizer folder of an endpoint's model: context counted before each request, each turn's ids
    recorded. '' counts tokens from the endpoint's usage instead (agent/openai_policy.USAGE_COUNTING_NOTE
    says what is then not measured; the summary's token_counts says which). Local models use their own."""

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class EvalResult:
    """What an evaluation call left behind."""

    experiment_id: str
    eval_id: str
    eval_dir: Path
    status: str
    """completed, incomplete or failed (the evaluation's status after this call)."""
    trials_total: int
    trials_done: int
    """Rows published (all attempts)."""
    trials_run: int
    """Trials played by this call (graded or aborted)."""
    rows: tuple[dict[str, Any], ...]
    """The published rows, in trial order."""
    summary: dict[str, Any] | None
    """summarize_trials + identity, when completed."""
    trials_aborted: int = 0
    """Trials of this call aborted on an infrastructure failure: no row, replayed by the next attempt."""

    @property
    def parquet(self) -> Path:
        return self.eval_dir / PARQUET_FILE

    @property
    def rows_dir(self) -> Path:
        """Where the per-trial logs are (rows/ROW_ID/{row.json,trajectory.json})."""
        return self.eval_dir / "rows"


class StopRequested(SignalStop):
    """SIGTERM arrived while the runner held the main thread: stop as Ctrl-C does (status incomplete)."""


class TrialsAbortedInARow(RuntimeError):
    """EvalRunConfig.stop_after_errors trials in a row aborted (infrastructure): the attempt stopped, failed."""


@dataclass
class _AttemptTally:
    """What this attempt has played so far (state the interrupt and stop messages read)."""

    ran: int = 0
    """Trials whose batch ended (graded or aborted)."""
    resolved: int = 0
    aborted: int = 0
    aborted_in_a_row: int = 0
    """Aborted trials since the last graded one, in trial order."""
    last_error: str = ""

    def __str__(self) -> str:
        return f"{_trials(self.ran)} of this attempt" + (f" ({self.aborted} aborted, no row)" if self.aborted else "")


def _trials(n: int) -> str:
    return f"{n} trial{'s' if n != 1 else ''}"


def eval_id_for(export_id: str, protocol_id: str, tag: str = "") -> str:
    """EXPORT_ID__PROTOCOL_ID[__TAG], shortened with a hash when longer than a folder name may be."""
    full = "__".join(p for p in (export_id, protocol_id, tag) if p)
    if len(full) <= 128:
        return check_name("EVAL_ID", full)
    short = f"{export_id[:40]}-{hashlib.sha256(full.encode()).hexdigest()[:8]}__{protocol_id}"
    return check_name("EVAL_ID", "__".join(p for p in (short, tag[:20]) if p))


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into StopRequested while the block runs (main thread, default handler only)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def handler(signum, frame):  # noqa: ARG001
        raise StopRequested("SIGTERM")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _load_policy(ref: PolicyRef, resolved: ResolvedProtocol, config: EvalRunConfig, method: str) -> tuple[Policy, Any]:
    """(policy, tokenizer) for the episodes; each trial's sampling seed is trial_seed(...)."""
    from transformers import AutoTokenizer

    from skillgate_core.agent.openai_policy import USAGE_COUNTS, OpenAIPolicy
    from skillgate_core.agent.seeded_policy import SeededPolicy
    from skillgate_core.policy.local_sampler import SamplingConfig, load_policy

    p = resolved.protocol

    def seed_of(view: EpisodeView) -> int:
        return trial_seed(p.seed, view.spec.task.task_id, view.spec.repeat)

    if ref.endpoint is not None:
        tokenizer = AutoTokenizer.from_pretrained(config.tokenizer) if config.tokenizer else None
        if config.tokenizer:
            _warn_on_context(p, model_context_limit(Path(config.tokenizer)), f"the model of {config.tokenizer}")
        return OpenAIPolicy(ref.endpoint, tokenizer, temperature=p.temperature, top_p=p.top_p,
                            max_new_tokens=p.max_new_tokens, seed_of=seed_of, name=method), tokenizer or USAGE_COUNTS
    import torch

    assert ref.model_dir is not None  # every policy but an endpoint has weights (PolicyRef.model_dir)
    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    model, tokenizer = load_policy(ref.model_dir, dtype=torch.bfloat16 if device == "cuda" else None, device=device)
    _warn_on_context(p, getattr(model.config, "max_position_embeddings", None), f"the model at {ref.model_dir}")
    sampling = SamplingConfig(temperature=p.temperature, top_p=p.top_p, max_new_tokens=p.max_new_tokens, seed=p.seed)
    return SeededPolicy(model, tokenizer, sampling, seed_of=seed_of, name=method), tokenizer


def _warn_on_context(protocol: Any, limit: int | None, what: str) -> None:
    line = context_warning(protocol, limit, what)
    if line:  # the CLI says it before the first trial too (context_limit.py); a stage run logs this warning
        warnings.warn(line, stacklevel=3)


def token_counts(ref: PolicyRef, config: EvalRunConfig) -> tuple[str, str]:
    """(how the evaluation counts tokens, what that leaves unmeasured or ''): an endpoint without a
    tokenizer is counted from its usage."""
    from skillgate_core.agent.openai_policy import USAGE_COUNTING_NOTE

    if ref.endpoint is not None and not config.tokenizer:
        return "endpoint usage", USAGE_COUNTING_NOTE
    return "tokenizer", ""


def _trajectory_log(trajectory: Trajectory) -> str:
    log = {k: getattr(trajectory, k) for k in ("task_id", "bench", "repeat", "policy", "prompt_profile", "status",
                                                "score", "raw_score", "missing_reward", "verifier_detail", "backend",
                                                "duration_s", "gold")}
    log.update(slate=[list(p) for p in zip(trajectory.slate_names, trajectory.slate_categories, strict=True)],
               messages=list(trajectory.messages), turns=[t.__dict__ for t in trajectory.turns],
               prompt_tokens=len(trajectory.prompt_ids), response_tokens=len(trajectory.response_ids),
               skill_opens=None if trajectory.skill_opens is None else [o.as_record() for o in trajectory.skill_opens],
               skill_consults=None if trajectory.skill_consults is None
               else [o.as_record() for o in trajectory.skill_consults])
    served = trajectory.extra.get("endpoint_usage")
    if served:  # no ids here: the server's counts (the prompt, and the context at the last turn)
        log.update(token_counts="endpoint usage", prompt_tokens=served["prompt_tokens"],
                   context_tokens=served["context_tokens"])
    return json.dumps(log, indent=1, ensure_ascii=False, default=list) + "\n"


def _trajectory_writer(log: str) -> Callable[[Path], None]:
    """write_eval_row's `files`: the trajectory log beside row.json in the row's temp folder."""

    def write(tmp: Path) -> None:
        atomic_write_text(tmp / TRAJECTORY_FILE, log)

    return write


def _ordered(rows: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows.values(), key=lambda r: int(r["trial_index"]))


def _open_evaluation(resolved: ResolvedProtocol, ref: PolicyRef, eval_id: str, root: Path,
                     extra: dict[str, Any]) -> tuple[EvalRecord, str | None]:
    """(the running record, the status it was resumed from or None when fresh)."""
    exp = experiment_dir(root, ref.experiment_id)
    fingerprint = resolved.protocol.fingerprint()
    if exp.eval_file(eval_id).is_file():
        existing = load_eval(exp, eval_id)
        if existing.protocol_fingerprint != fingerprint:
            raise ProtocolConflictError(
                f"evaluation {ref.experiment_id}/{eval_id} was recorded under protocol fingerprint "
                f"{existing.protocol_fingerprint}, this run gives fingerprint {fingerprint}: refusing to mix their trials"
            )
        if existing.status == "completed":
            return existing, "completed"
        record, previous = reopen_eval(root, ref.experiment_id, eval_id)
        return record, previous
    record = start_eval(root, ref.experiment_id, eval_id, export_id=ref.export_id,
                        protocol_fingerprint=fingerprint, extra=extra)
    return record, None


def run_evaluation(
    resolved: ResolvedProtocol,
    ref: PolicyRef,
    config: EvalRunConfig = EvalRunConfig(),
    *,
    root: Path | None = None,
    progress: bool = True,
    observer: EvalObserver | None = None,
) -> EvalResult:
    """Run (or resume, or return) the evaluation of `ref` under `resolved` (module docstring)."""
    from tqdm import tqdm

    layout = state_layout()
    root = Path(root) if root is not None else layout.experiments
    observer = observer or current_observer()
    protocol = resolved.protocol
    protocol_id, fingerprint = protocol.protocol_id(), protocol.fingerprint()
    if config.pin:
        check_pinned_id(protocol, config.pin)
    register_protocol(protocol, layout.home / "protocols")
    method = config.method or ref.label
    eval_id = eval_id_for(ref.export_id, protocol_id, config.tag)
    exp = experiment_dir(root, ref.experiment_id)
    extra = {"protocol_id": protocol_id, "spec_id": protocol.spec_id, "method": method, "policy": ref.location,
             "tag": config.tag, "demo": resolved.demo, "note": resolved.note(), "bench": str(resolved.bench),
             "spec_source": resolved.spec.source, "trials_total": resolved.trial_count(),
             "token_counts": token_counts(ref, config)[0]}
    record, previous = _open_evaluation(resolved, ref, eval_id, root, extra)
    eval_dir = exp.eval(eval_id)
    total = resolved.trial_count()
    if previous == "completed":
        rows = _ordered(list_eval_rows(exp, eval_id))
        summary = json.loads((eval_dir / SUMMARY_FILE).read_text()) if (eval_dir / SUMMARY_FILE).is_file() else None
        return EvalResult(ref.experiment_id, eval_id, eval_dir, "completed", total, len(rows), 0, tuple(rows), summary)
    info = EvalInfo(root=root, record=record, eval_dir=eval_dir, protocol=protocol, method=method,
                    policy=ref.location, tag=config.tag, bench=resolved.bench, trials_total=total,
                    previous_status=previous, created=ref.created)
    observer.started(info)
    context = TrialContext(protocol_id=protocol_id, fingerprint=fingerprint, method=method,
                           experiment_id=ref.experiment_id, export_id=ref.export_id, policy=ref.location,
                           protocol_seed=protocol.seed)
    repeats = protocol.repeats
    plan = [(ti * repeats + r, task, r) for ti, task in enumerate(resolved.tasks) for r in range(repeats)]
    done = set(list_eval_rows(exp, eval_id))
    missing = [t for t in plan if row_id(t[1].task_id, t[2]) not in done]
    tally, stopped_early = _AttemptTally(), False
    try:
        with _sigterm_as_interrupt():
            if missing:
                stopped_early = _play(resolved, ref, config, method, missing, context, info, observer,
                                      total, len(done), progress, tqdm, tally)
    except (KeyboardInterrupt, SystemExit) as exc:
        signal_name = interrupt_signal(exc)  # the signal that asked, as received (a Ctrl-C is SIGINT)
        how = f"by {signal_name}" if signal_name else f"({type(exc).__name__}: {exc})"
        ended = finish_eval(root, ref.experiment_id, eval_id, "incomplete", f"interrupted {how} after {tally}")
        observer.ended(info, ended, None)
        raise
    except BaseException as exc:
        # A cancel from the orchestrator stops the evaluation as a Ctrl-C does: incomplete, resumable.
        cancelled_by = cancellation(exc)
        ended = finish_eval(root, ref.experiment_id, eval_id, "incomplete" if cancelled_by else "failed",
                            f"{cancelled_by}; run it again to resume" if cancelled_by else f"{type(exc).__name__}: {exc}")
        observer.ended(info, ended, None)
        raise
    rows = _ordered(list_eval_rows(exp, eval_id))
    if stopped_early or len(rows) < total:
        why = (f"stopped after {tally} (max_trials={config.max_trials})" if stopped_early
               else f"{_trials(tally.aborted)} aborted on infrastructure failures (last: {tally.last_error}; "
                    f"{ABORTED_FILE}); no row for them")
        ended = finish_eval(root, ref.experiment_id, eval_id, "incomplete",
                            f"{why}; {total - len(rows)} of {total} missing: run it again to play them")
        observer.ended(info, ended, None)
        return EvalResult(ref.experiment_id, eval_id, eval_dir, "incomplete", total, len(rows), tally.ran, tuple(rows),
                          None, tally.aborted)
    write_trials(rows, tmp := eval_dir / f".tmp-{PARQUET_FILE}")
    tmp.replace(eval_dir / PARQUET_FILE)
    summary = {
        **summarize_rows(rows, protocol.repeats),
        "protocol_id": protocol_id, "fingerprint": fingerprint, "spec_id": protocol.spec_id,
        "experiment_id": ref.experiment_id, "export_id": ref.export_id, "eval_id": eval_id, "method": method,
        "policy": ref.location, "tag": config.tag, "demo": resolved.demo, "note": resolved.note(),
        "eval_dir": str(eval_dir), "attempts": record.attempt, "status": "completed",
    }
    summary["token_counts"], summary["token_counts_note"] = token_counts(ref, config)
    atomic_write_json(eval_dir / SUMMARY_FILE, summary)
    ended = finish_eval(root, ref.experiment_id, eval_id, "completed")
    observer.ended(info, ended, summary)
    return EvalResult(ref.experiment_id, eval_id, eval_dir, "completed", total, len(rows), tally.ran, tuple(rows),
                      summary, tally.aborted)


def _log_aborted(eval_dir: Path, attempt: int, trial_index: int, rid: str, trajectory: Trajectory) -> None:
    entry = {"row_id": rid, "trial_index": trial_index, "attempt": attempt,
             "error": trajectory.verifier_detail or "aborted", "seconds": round(float(trajectory.duration_s), 3)}
    with (eval_dir / ABORTED_FILE).open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _play(resolved, ref, config, method, missing, context, info, observer, total, already, progress, tqdm,
          tally: _AttemptTally) -> bool:
    """Play the missing trials in lockstep batches, counting into `tally`; returns whether max_trials
    stopped it. Aborted trials get no row (module docstring 3); stop_after_errors of them in a row raise
    TrialsAbortedInARow."""
    protocol = resolved.protocol
    policy, tokenizer = _load_policy(ref, resolved, config, method)
    episode_config = EpisodeConfig(max_turns=protocol.max_turns, max_context_tokens=protocol.context_size,
                                   max_new_tokens=protocol.max_new_tokens, wall_clock_s=protocol.wall_clock_s,
                                   backend=protocol.backend, workers=config.sandbox_workers)
    snapshot = None
    if resolved.skill_names:
        snapshot = snapshot_skills([resolved.bench / "skills" / n for n in resolved.skill_names], below=resolved.bench)
        if snapshot.digest != protocol.snapshot_digest:
            raise RuntimeError(f"skill snapshot {snapshot.digest} differs from the protocol's {protocol.snapshot_digest}: "
                               "the bench's skills changed while the protocol was being resolved")
    exp_root = info.root
    with tempfile.TemporaryDirectory(prefix="skillgate-eval-") as scratch, \
            tqdm(total=total, initial=already, desc=f"{method} on {protocol.protocol_id()}", unit="trial",
                 disable=not progress) as bar:  # the arm on the bar: a run may evaluate several on one protocol
        packages = {}
        start = 0
        while start < len(missing):
            # max_trials cuts the last batch: each trial depends on its own seed only, never on its batch
            size = (min(config.batch_episodes, config.max_trials - tally.ran) if config.max_trials
                    else config.batch_episodes)
            batch = missing[start : start + size]
            specs = []
            for _, task, repeat in batch:
                if task.task_id not in packages:
                    skills = (slate_skills_dir(snapshot.path, task.slate.names, Path(scratch) / task.task_id)
                              if task.slate is not None and snapshot is not None else None)
                    packages[task.task_id] = (load_task_package(task.path, within=resolved.bench), skills)
                package, skills = packages[task.task_id]
                specs.append(EpisodeSpec(package, task.slate, skills, bench=task.benchmark, repeat=repeat))
            trajectories = run_episodes(specs, policy, tokenizer, episode_config, resolved.profile)
            published = []
            for (trial_index, task, repeat), trajectory in zip(batch, trajectories, strict=True):
                rid = row_id(task.task_id, repeat)
                tally.ran += 1  # counted as it lands: an interrupt from here on says how many were played
                if trajectory.status == "aborted":  # infrastructure, not the policy: no row, replayed later
                    _log_aborted(info.eval_dir, info.record.attempt, trial_index, rid, trajectory)
                    tally.aborted += 1
                    tally.aborted_in_a_row += 1
                    tally.last_error = trajectory.verifier_detail or "aborted"
                    continue
                tally.aborted_in_a_row = 0
                row = {**trial_row(trajectory, context, tokenizer), "row_id": rid, "trial_index": trial_index}
                write_eval_row(exp_root, ref.experiment_id, info.record.eval_id, rid, row,
                               files=_trajectory_writer(_trajectory_log(trajectory)))
                published.append(row)
                tally.resolved += row["outcome"] == "resolved"
            if published:
                observer.trials(info, published)
            bar.set_postfix(resolved=tally.resolved, errors=tally.aborted, refresh=False)
            bar.update(len(batch))
            start += len(batch)
            if config.stop_after_errors and tally.aborted_in_a_row >= config.stop_after_errors:
                raise TrialsAbortedInARow(
                    f"{ref.location}: the last {_trials(tally.aborted_in_a_row)} in a row aborted (last error: "
                    f"{tally.last_error}); stopped after {tally}, {len(missing) - start} not started. No row was "
                    f"written for them ({ABORTED_FILE} lists them): once it answers, run the same command again "
                    "to play exactly the trials without a row")
            if config.max_trials and tally.ran >= config.max_trials and start < len(missing):
                return True
    return False


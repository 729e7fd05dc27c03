"""The selection probe: which of the slate's 16 skills a policy would read first, without an episode.

For each task of a protocol, the policy's prompt is rendered exactly as an episode renders it (the
protocol's prompt profile, the slate in its frozen order, the policy's chat template); then each of
the 16 slate names is scored as the target of the first read, teacher-forced:

    log p(turn(name) | prompt),  turn(name) = the teacher's first read turn on /skills/name/SKILL.md

(`turn="call"`: the bare read call; `turn="reasoning"`: the teacher's <skill_reasoning> naming the
skill, then the call; both end with the turn terminator). The 16 turns differ only in the name, so
the softmax over the 16 scores is the policy's choice among the slate, and it costs one forward pass
of the shared prefix (its KV cache is reused for the 16 short continuations) instead of episodes.
Reported per task and per family: the oracle's rank-1 rate (chance 1/16) with a bootstrap interval
over tasks, the probability mass on the oracle, the five misleading lookalikes, the relevant and
the irrelevant skills, and the in-cluster choice: P(oracle | cluster) = the oracle's mass over the
mass of its cluster (itself and its five lookalikes; chance 1/6) and the cluster rank-1 rate.
`probe_training_rows` probes held-in training prompts (rl-data-prep rows, renamed as shown): the
learnability gate's held-in figure, and the curve GRPO logs on a fixed sample.

    result = probe_selection(resolved, model_dir, ProbeConfig())
    result.summary["oracle_rank1_rate"], result.summary["oracle_rank1_ci"]

No anchor reports this; it is what the eval70 episodes' `first read` would be if the policy always
opened with a read, measured with no sampling noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from skillgate_core.agent.policies import task_cue
from skillgate_core.agent.prompts import build_messages, render_prompt_ids
from skillgate_core.agent.selection_scores import (
    CATEGORIES,
    probe_prompt,
    probe_training_rows,
    score_candidates,
)
from skillgate_core.base.config_ranges import NonNegativeInt, PositiveInt, Probability, check_ranges
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.evaluation.bootstrap import percentile_interval
from skillgate_core.evaluation.specs import ProtocolTask, ResolvedProtocol

__all__ = ["CATEGORIES", "ProbeConfig", "ProbeResult", "probe_prompt", "probe_selection", "probe_training_rows",
           "score_candidates", "summarize_probe"]

@dataclass(frozen=True)
class ProbeConfig:
    """How the probe scores (only `turn` changes what is measured)."""

    turn: Literal["call", "reasoning"] = "call"
    """The scored first turn: the bare read call, or the teacher's <skill_reasoning> naming the skill, then
    the call (where an SFT policy trained on the teacher makes its choice)."""
    max_tasks: NonNegativeInt = 0
    """Probe only the first N tasks of the protocol (0 = all)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the model runs."""
    cpu_threads: NonNegativeInt = 0
    """torch threads on CPU (0 = torch's default)."""
    resamples: PositiveInt = 10_000
    """Bootstrap resamples of the task set for the rank-1 interval."""
    confidence: Probability = 0.95
    """Interval coverage."""
    seed: NonNegativeInt = 0
    """Bootstrap seed."""

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class ProbeResult:
    """Per-task rows and their summary."""

    rows: list[dict[str, Any]]
    """One row per task: names and categories in slate order, their log-probs and normalised probs."""
    summary: dict[str, Any]
    """summarize_probe(rows)."""


def probe_task(model: Any, tokenizer: Any, resolved: ResolvedProtocol, task: ProtocolTask,
               turn: str) -> dict[str, Any]:
    """The probe row of one task of a protocol (module docstring)."""
    if task.slate is None or task.slate.oracle is None:
        raise ValueError(f"task {task.task_id}: the probe needs a slate with an oracle (protocol skill mode "
                         f"{resolved.spec.skill_mode!r})")
    package = load_task_package(task.path, within=resolved.bench)
    prompt = render_prompt_ids(tokenizer, build_messages(resolved.profile, package.instruction, task.slate))
    row = probe_prompt(model, tokenizer, prompt, [e.name for e in task.slate.entries],
                       [e.category for e in task.slate.entries], task.slate.oracle, turn, task_cue(package),
                       label=f"task {task.task_id}")
    return {"task_id": task.task_id, "benchmark": task.benchmark, "oracle": task.slate.oracle, **row}


def _rank1_interval(hits: np.ndarray, config: ProbeConfig) -> tuple[float, float]:
    rng = np.random.Generator(np.random.PCG64(config.seed))
    draws = rng.integers(0, len(hits), size=(config.resamples, len(hits)))
    return percentile_interval(hits[draws].mean(axis=1), config.confidence)


def _aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    hits = np.array([r["oracle_rank"] == 1 for r in rows], dtype=float)
    out: dict[str, Any] = {"tasks": len(rows), "oracle_rank1": int(hits.sum()),
                           "oracle_rank1_rate": float(hits.mean()),
                           "mean_oracle_rank": float(np.mean([r["oracle_rank"] for r in rows]))}
    if all("oracle_given_cluster" in r for r in rows):  # rows written before the in-cluster figures lack them
        out["oracle_given_cluster"] = float(np.mean([r["oracle_given_cluster"] for r in rows]))
        out["cluster_rank1_rate"] = float(np.mean([bool(r["cluster_rank1"]) for r in rows]))
    for category in CATEGORIES:
        out[f"{category}_mass"] = float(np.mean([r[f"{category}_mass"] for r in rows]))
    return out


def summarize_probe(rows: Sequence[Mapping[str, Any]], config: ProbeConfig = ProbeConfig()) -> dict[str, Any]:
    """Overall and per-family figures; the rank-1 interval resamples tasks (seeded percentile bootstrap)."""
    if not rows:
        raise ValueError("no probe rows to summarize")
    hits = np.array([r["oracle_rank"] == 1 for r in rows], dtype=float)
    low, high = _rank1_interval(hits, config)
    families = sorted({r["benchmark"] for r in rows})
    return {**_aggregate(rows), "oracle_rank1_ci": [low, high], "confidence": config.confidence,
            "chance": 1.0 / len(rows[0]["names"]), "cluster_chance": 1.0 / 6, "turn": config.turn,
            "by_benchmark": {f: _aggregate([r for r in rows if r["benchmark"] == f]) for f in families}}


def load_probe_model(model_dir: Path, config: ProbeConfig) -> tuple[Any, Any]:
    """(model, tokenizer) in float32 on CPU, bfloat16 on CUDA, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    use_cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    if not use_cuda and config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    dtype = torch.bfloat16 if use_cuda else torch.float32
    model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    return model.to("cuda" if use_cuda else "cpu").eval(), AutoTokenizer.from_pretrained(model_dir)


def probe_selection(resolved: ResolvedProtocol, model_dir: str | Path, config: ProbeConfig = ProbeConfig(), *,
                    progress: bool = True) -> ProbeResult:
    """Probe every task of `resolved` (or the first `max_tasks`) with the policy at `model_dir`."""
    from tqdm import tqdm

    model, tokenizer = load_probe_model(Path(model_dir), config)
    tasks = resolved.tasks[: config.max_tasks] if config.max_tasks else resolved.tasks
    rows = [probe_task(model, tokenizer, resolved, task, config.turn)
            for task in tqdm(tasks, desc="selection probe", unit="task", disable=not progress)]
    summary = summarize_probe(rows, config)
    summary.update(protocol_id=resolved.protocol.protocol_id(), fingerprint=resolved.protocol.fingerprint(),
                   policy=str(model_dir))
    return ProbeResult(rows, summary)


PROBE_SUMMARY_FILE = "probe_summary.json"
"""The probe's summary beside an evaluation's rows (eval_rows/): what the paper's main table reads."""
PROBE_ROWS_FILE = "probe_rows.parquet"
"""Its per-task rows."""


def write_probe(result: ProbeResult, folder: Path, method: str) -> Path:
    """Write the rows and the summary (labelled with the evaluation's `method`) into `folder`."""
    from skillgate_core.base.atomic import atomic_write_json
    from skillgate_core.base.parquet_rows import write_rows

    folder.mkdir(parents=True, exist_ok=True)
    write_rows(result.rows, folder / PROBE_ROWS_FILE)
    return atomic_write_json(folder / PROBE_SUMMARY_FILE, {**result.summary, "method": method})


def read_probe_summaries(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(fingerprint, method) -> probe summary, for every probe_summary.json under `root` (sorted)."""
    import json

    found: dict[tuple[str, str], dict[str, Any]] = {}
    paths = [root] if root.is_file() else sorted(Path(root).rglob(PROBE_SUMMARY_FILE))
    for path in paths:
        if path.name != PROBE_SUMMARY_FILE or path.is_symlink() or not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            key = (str(data["fingerprint"]), str(data["method"]))
            float(data["oracle_rank1_rate"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a probe summary ({exc}); expected the file `skillgate eval probe` "
                             "or the eval70 stage writes") from None
        found[key] = data
    return found

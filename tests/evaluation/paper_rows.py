"""A fixed synthetic evaluation (3 methods x 2 benchmarks x 10 tasks x 4 repeats) and training files.

Seeded, so the same seed writes the same rows: the paper-build tests use it as their raw input.

    write_synthetic_evals(root)      # root/<method>/eval_trials.parquet, one per method
    write_synthetic_training(root)   # root/<profile>/metrics.jsonl and credit_episodes.jsonl
    selection_rows("m", {"t0": 3, "t1": 1})  # rows whose oracle reads are set by hand
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillgate_core.evaluation.rows import EVAL_TRIALS_FILE, write_eval_rows

FINGERPRINT = "3fa2c01b9e" + "7" * 54
PROTOCOL_ID = f"eval70_v1__mixed__r4__{FINGERPRINT[:10]}"
BENCHMARKS = ("abductive_diagnosis", "procedural_execution")
TASKS_PER_BENCHMARK = 10
REPEATS = 4

# method -> (P(read), P(first read is oracle | read), P(second read | read), success by first read)
METHODS: dict[str, tuple[float, float, float, dict[str, float]]] = {
    "selector_clean_oracle_action_credit": (0.9, 0.8, 0.1, {"oracle": 0.7, "misleading": 0.2, "none": 0.35}),
    "mixed_task_reward": (0.5, 0.45, 0.3, {"oracle": 0.65, "misleading": 0.2, "none": 0.35}),
    "selector_action_credit": (0.85, 0.7, 0.35, {"oracle": 0.6, "misleading": 0.2, "none": 0.35}),
}
_OTHER = ("misleading", "misleading", "relevant", "irrelevant", "unadvertised")


def _trial(rng: random.Random, method: str, bench: str, task: str, repeat: int, difficulty: float) -> dict[str, Any]:
    p_read, p_oracle, p_second, success = METHODS[method]
    reads: list[str] = []
    if rng.random() < p_read:
        reads.append("oracle" if rng.random() < p_oracle else rng.choice(_OTHER))
        if rng.random() < p_second:
            reads.append(rng.choice(("oracle", *_OTHER)))
    names = [f"{task}-{c}" if c == "oracle" else f"{task}-{c}-{rng.randrange(5)}" for c in reads]
    first = reads[0] if reads else None
    p = success["oracle" if first == "oracle" else "misleading" if first == "misleading" else "none"] - difficulty
    aborted = rng.random() < 0.03
    resolved = not aborted and rng.random() < max(0.0, p)
    score = 1.0 if resolved else (0.0 if aborted else round(rng.random() * 0.9, 3))
    turns = rng.randint(2, 20)
    response = turns * rng.randint(80, 400)
    return {
        "protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "method": method,
        "experiment_id": f"grpo-{method}-0001", "export_id": f"{method}-step-200", "policy": f"exports/{method}",
        "task_id": task, "benchmark": bench, "repeat": repeat,
        "status": "aborted" if aborted else ("truncated" if turns == 20 else "completed"),
        "outcome": "error" if aborted else ("resolved" if resolved else "fail"),
        "score": score, "raw_score": None if aborted else score, "error": "sandbox start failed" if aborted else "",
        "reads": reads, "read_names": names, "first_read_category": first,
        "skill_reasoning": rng.random() < 0.5, "turns": turns, "response_tokens": response,
        "loss_tokens": response, "seconds": round(turns * rng.uniform(2.0, 9.0), 3), "seed": 1234 + repeat,
    }


def synthetic_rows(seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """method -> its 80 trial rows."""
    rng = random.Random(seed)
    out: dict[str, list[dict[str, Any]]] = {}
    difficulty = {f"{b[:4]}-{i:02d}": rng.uniform(-0.2, 0.3) for b in BENCHMARKS for i in range(TASKS_PER_BENCHMARK)}
    for method in METHODS:
        out[method] = [_trial(rng, method, bench, f"{bench[:4]}-{i:02d}", r, difficulty[f"{bench[:4]}-{i:02d}"])
                       for bench in BENCHMARKS for i in range(TASKS_PER_BENCHMARK) for r in range(REPEATS)]
    return out


def write_synthetic_evals(root: Path, seed: int = 0) -> Path:
    for method, rows in synthetic_rows(seed).items():
        write_eval_rows(rows, root / method / EVAL_TRIALS_FILE)
    return root


def write_synthetic_training(root: Path, seed: int = 0, steps: int = 20, episodes: int = 160) -> Path:
    rng = random.Random(seed + 1)
    for profile, lift in (("mixed_task_reward", 0.0), ("selector_clean_oracle_action_credit", 0.3)):
        rows = []
        for step in range(steps):
            oracle = min(1.0, 0.4 + lift * step / steps + rng.uniform(-0.05, 0.05))
            rows.append({
                "step": step, "profile": profile, "reward": 0.3 + 0.01 * step, "success_rate": 0.25 + 0.01 * step,
                "read_rate": 0.6, "oracle_read_rate": oracle, "misleading_read_rate": 0.2,
                "clean_oracle_rate": oracle * 0.8, "selector_active_fraction": 0.5 if lift else 0.0,
                "task_token_mass": 4096.0, "selector_token_mass": 4096.0 if lift else 0.0, "loss_tokens": 4096.0,
                "selection_token_share": 0.004, "read_call_token_share": 0.02,
                "oracle_negative_advantage_rate": 0.1 if lift else None, "kl": 0.001 * step, "clip_fraction": 0.02,
                "time_generate_s": 10.0, "time_env_s": 5.0, "time_train_s": 3.0, "time_sync_s": 1.0,
            })
        credit = []
        for _ in range(episodes):
            response = rng.randint(100, 12000)
            reads = rng.randint(0, 2)
            oracle = sum(rng.random() < 0.5 for _ in range(reads))
            credit.append({
                "step": rng.randrange(steps), "profile": profile, "response_tokens": response,
                "loss_tokens": response, "read_call_tokens": 24 * reads, "identity_tokens": 3 * reads,
                "oracle_actions": oracle,
                "oracle_negative_actions": sum(rng.random() < (0.1 if lift else 0.5) * response / 12000
                                               for _ in range(oracle)),
            })
        folder = root / profile
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        (folder / "credit_episodes.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in credit))
    return root


def selection_rows(method: str, oracle_trials: Mapping[str, int]) -> list[dict[str, Any]]:
    """REPEATS trials per task: the first `oracle_trials[task]` read only the oracle, the rest one misleading
    skill; repeat 0 resolves and the others fail whatever was read (the same trial success in every arm)."""
    rows = []
    for task, oracle in oracle_trials.items():
        for repeat in range(REPEATS):
            category = "oracle" if repeat < oracle else "misleading"
            rows.append({"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "method": method, "task_id": task,
                         "benchmark": "b", "repeat": repeat, "outcome": "resolved" if repeat == 0 else "fail",
                         "status": "completed", "reads": [category], "read_names": [f"{task}-{category}"],
                         "first_read_category": category})
    return rows

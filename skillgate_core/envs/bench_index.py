"""A bench's task index (tasks.jsonl): the rows of one split, each checked before it names a folder.

    rows = load_bench_rows(bench_dir, "train")    # [{"task_id": ..., "path": ..., "split": "train", ...}]
"""

from __future__ import annotations

import json
from pathlib import Path

from skillgate_core.base.safe_paths import check_task_row

__all__ = ["load_bench_rows"]


def load_bench_rows(bench: Path, split: str) -> list[dict]:
    """The tasks.jsonl rows of one split, sorted by task id; a clear error when the split is empty."""
    index = bench / "tasks.jsonl"
    if not index.is_file():
        raise FileNotFoundError(f"{index}: missing; expected a bench built by `skillgate bench build`")
    rows = [json.loads(line) for line in index.read_text().splitlines() if line.strip()]
    for n, row in enumerate(rows, 1):
        check_task_row(row, source=f"{index} line {n}")  # task_id and path name folders
    chosen = sorted((r for r in rows if r.get("split") == split), key=lambda r: r["task_id"])
    if not chosen:
        splits = sorted({r.get("split") for r in rows})
        raise ValueError(f"{index}: no task in split '{split}'; splits present: {', '.join(map(str, splits))}")
    return chosen

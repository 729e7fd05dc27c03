"""eval_trials.parquet is written with pyarrow alone (the GPU machine has no polars): the same rows give
the same bytes with or without polars, and a polars reader sees exactly the frame the polars writer
used to write (same columns, dtypes and values)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal
from support.gpu_machine import run_without_absent
from support.trial_schema import POLARS_TRIAL_SCHEMA

from skillgate_core.evaluation.rows import read_eval_rows
from skillgate_core.evaluation.trials import TRIAL_COLUMNS, write_trials


def _rows() -> list[dict]:
    rows = []
    for i in range(6):
        reads = [["oracle"], ["misleading", "oracle"], [], ["irrelevant"], ["oracle", "oracle"], []][i]
        rows.append({
            "protocol_id": "eval70_v1__mixed__r4__0123456789", "fingerprint": "f" * 64, "method": "m",
            "experiment_id": "grpo-x", "export_id": "step-2", "policy": "/p", "task_id": f"t{i // 2}",
            "benchmark": "procedural", "repeat": i % 2, "status": "aborted" if i == 5 else "completed",
            "outcome": "error" if i == 5 else ("resolved" if i % 3 == 0 else "fail"), "score": float(i % 3 == 0),
            "raw_score": None if i == 2 else 0.5 * i, "error": "aborted" if i == 5 else "",
            "reads": reads, "read_names": [f"skill-{r}" for r in reads], "first_read_category": reads[0] if reads else None,
            "skill_reasoning": i % 2 == 0, "turns": 3 + i, "response_tokens": 100 * i, "loss_tokens": 90 * i,
            "seconds": 1.25 * i, "seed": 2**62 + i,
            # consultation: the reads, plus a script of another skill run in one trial; null in an older row
            "consulted_names": None if i == 4 else [f"skill-{r}" for r in reads] + (["skill-other"] if i == 1 else []),
            # the premise's token counts: null where not measured (an endpoint counted by its usage)
            "name_tokens": None if i == 3 else 2 * i, "read_call_tokens": None if i == 3 else 20 * i,
            "reasoning_tokens": None if i == 3 else 30 * i,
        })
    return rows


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_polars_reader_sees_the_frame_the_polars_writer_wrote(tmp_path):
    rows = _rows()
    path = write_trials(rows, tmp_path / "eval_trials.parquet")
    assert_frame_equal(pl.read_parquet(path), pl.DataFrame(rows, schema=POLARS_TRIAL_SCHEMA))
    assert [{k: r[k] for k in TRIAL_COLUMNS} for r in read_eval_rows(path)] == rows


def test_the_same_rows_give_the_same_bytes_without_polars(tmp_path):
    rows = _rows()
    here = write_trials(rows, tmp_path / "here" / "eval_trials.parquet")
    again = write_trials(rows, tmp_path / "again" / "eval_trials.parquet")
    code = ("import json\nfrom pathlib import Path\nfrom skillgate_core.evaluation.trials import write_trials\n"
            f"write_trials(json.loads({json.dumps(rows)!r}), Path({str(tmp_path / 'gpu' / 'eval_trials.parquet')!r}))\n")
    result = run_without_absent(code, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sha(here) == sha(again) == sha(tmp_path / "gpu" / "eval_trials.parquet")


def test_rows_from_before_the_premise_columns_are_written_and_read_with_nulls(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from skillgate_core.evaluation.trials import PREMISE_TOKEN_COLUMNS, summarize_rows

    old = [{k: v for k, v in r.items() if k not in PREMISE_TOKEN_COLUMNS} for r in _rows()]
    # a row.json published before the columns existed (an evaluation resumed across the change)
    written = read_eval_rows(write_trials(old, tmp_path / "resumed" / "eval_trials.parquet"))
    assert all(r[c] is None for r in written for c in PREMISE_TOKEN_COLUMNS)
    # and an eval_trials.parquet written before them: read as it is, its premise tokens unmeasured
    (tmp_path / "old").mkdir()
    pq.write_table(pa.Table.from_pylist(old), tmp_path / "old" / "eval_trials.parquet")
    rows = read_eval_rows(tmp_path / "old")
    premise = summarize_rows(rows, repeats=2)["premise"]
    assert (premise["episodes"], premise["episodes_aborted"], premise["token_episodes"]) == (5, 1, 0)
    assert premise["name_token_share"] is None and premise["oracle_read_episodes"] == 3

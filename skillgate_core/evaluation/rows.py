"""Raw evaluation rows: the eval_trials.parquet schema, reading a folder of them, grouping by method.

One evaluation (one policy on one frozen protocol) writes one `eval_trials.parquet`, one row per
trial; a folder may hold several evaluations (several methods), at any depth:

    rows = read_eval_rows(Path("evals"))          # every eval_trials.parquet under evals/, sorted
    for name, methods in group_by_protocol(rows).items():
        ...                                       # MethodTrials per `method`, one protocol name each

An owned evaluation's folder holds its eval.json beside the parquet; its tag (the nightly's
`nightly-YYYY-MM-DD`, a user's --tag) lets a build leave tagged re-runs out (`exclude_tags`: shell
patterns): a nightly evaluates the export a paper already reports, under the same protocol, so its
rows would repeat every trial.

Rows are grouped by *protocol name* (`eval70_v1__mixed__r4`: the protocol id without its fingerprint
hex): a protocol name whose rows carry two fingerprints is kept together, so that the table that
compares them refuses (docs/method.md 8, comparison hygiene) instead of silently splitting it.
"""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.base.safe_paths import UnsafeNameError, check_id
from skillgate_core.evaluation.metrics import OUTCOMES, Trial

__all__ = [
    "EVAL_TRIALS_FILE",
    "REQUIRED_COLUMNS",
    "TRIAL_SCHEMA",
    "EvalRowsError",
    "MethodTrials",
    "eval_files",
    "group_by_protocol",
    "protocol_name",
    "read_eval_rows",
    "trial_arrow_schema",
    "write_eval_rows",
]

EVAL_TRIALS_FILE = "eval_trials.parquet"

TRIAL_SCHEMA: tuple[tuple[str, str], ...] = (
    ("protocol_id", "string"),
    ("fingerprint", "string"),
    ("method", "string"),
    ("experiment_id", "string"),
    ("export_id", "string"),
    ("policy", "string"),
    ("task_id", "string"),
    ("benchmark", "string"),
    ("repeat", "int32"),
    ("status", "string"),
    ("outcome", "string"),
    ("score", "float64"),
    ("raw_score", "float64"),
    ("error", "string"),
    ("reads", "list<string>"),
    ("read_names", "list<string>"),
    ("first_read_category", "string"),
    ("skill_reasoning", "bool"),
    ("turns", "int32"),
    ("response_tokens", "int32"),
    ("loss_tokens", "int32"),
    ("seconds", "float64"),
    ("seed", "int64"),
    ("consulted_names", "list<string>"),
    ("name_tokens", "int32"),
    ("read_call_tokens", "int32"),
    ("reasoning_tokens", "int32"),
)
"""Column -> Arrow type of one trial row, in file order (raw_score and first_read_category may be null;
consulted_names is null in rows written before consultation was recorded: the reads stand for it; the premise's
token counts name_tokens, read_call_tokens and reasoning_tokens are null where no token ids were recorded, an
endpoint counted by its usage, and absent from rows written before they existed)."""

REQUIRED_COLUMNS = ("protocol_id", "fingerprint", "method", "task_id", "benchmark", "repeat", "outcome",
                    "reads", "read_names")
"""What the paper build cannot do without; the cost columns default to 0 when absent."""

_STATUSES = ("completed", "truncated", "aborted")


class EvalRowsError(ValueError):
    """An eval_trials.parquet file is missing a column, holds an impossible row, or repeats a trial."""


def trial_arrow_schema() -> Any:
    """TRIAL_SCHEMA as a pyarrow schema (what eval_trials.parquet holds)."""
    import pyarrow as pa

    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(),
             "bool": pa.bool_(), "list<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[kind]) for name, kind in TRIAL_SCHEMA])


def write_eval_rows(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Write trial rows with the exact TRIAL_SCHEMA (the runner's format; tests use it too): columns in
    TRIAL_SCHEMA order, a missing one null, skillgate_core.base.parquet_rows' fixed writer."""
    from skillgate_core.base.parquet_rows import write_rows

    return write_rows(rows, path, schema=trial_arrow_schema())


def _check_row(row: Mapping[str, Any], where: str) -> None:
    try:  # the protocol id names the report's section folders (tables/NAME/, figures/NAME/)
        check_id(row["protocol_id"], source=where, field="protocol_id")
    except UnsafeNameError as exc:
        raise EvalRowsError(str(exc)) from None
    if row["outcome"] not in OUTCOMES:
        raise EvalRowsError(f"{where}: outcome {row['outcome']!r} is not one of {', '.join(OUTCOMES)}")
    status = row.get("status")
    if status is not None and status not in _STATUSES:
        raise EvalRowsError(f"{where}: status {status!r} is not one of {', '.join(_STATUSES)}")
    if status == "aborted" and row["outcome"] != "error":
        raise EvalRowsError(f"{where}: an aborted trial must have outcome 'error', got {row['outcome']!r}")
    reads = list(row["reads"] or [])
    first = row.get("first_read_category", reads[0] if reads else None)
    if first != (reads[0] if reads else None):
        raise EvalRowsError(f"{where}: first_read_category {first!r} disagrees with reads {reads}")
    consulted = row.get("consulted_names")
    if consulted is not None and not set(row["read_names"] or []) <= set(consulted):
        raise EvalRowsError(f"{where}: consulted_names {consulted} lacks a skill of read_names {row['read_names']} "
                            "(a read is a consultation)")


def _tag(parquet: Path) -> str:
    """The tag of the owned evaluation whose folder holds `parquet` ('' for a loose file)."""
    record = parquet.parent / "eval.json"
    if not record.is_file():
        return ""
    try:
        tag = json.loads(record.read_text(encoding="utf-8")).get("extra", {}).get("tag") or ""
    except (OSError, ValueError, AttributeError) as exc:
        raise EvalRowsError(f"{record}: unreadable evaluation record ({type(exc).__name__}: {exc})") from None
    return str(tag)


def eval_files(folder: Path, exclude_tags: Sequence[str] = ()) -> tuple[list[Path], list[tuple[str, str]]]:
    """(the eval_trials.parquet files under `folder` in sorted order, [(relative path, tag) of those
    left out because their evaluation's tag matches a pattern of `exclude_tags`]). Raises
    FileNotFoundError when there is none at all."""
    folder = Path(folder)
    if folder.is_file():
        files, root = [folder], folder.parent
    else:
        files, root = sorted(folder.rglob(EVAL_TRIALS_FILE)), folder
    if not files:
        raise FileNotFoundError(f"{folder}: no {EVAL_TRIALS_FILE} found (one per evaluation, at any depth)")
    kept, left_out = [], []
    for path in files:
        tag = _tag(path) if exclude_tags else ""
        if tag and any(fnmatch.fnmatchcase(tag, pattern) for pattern in exclude_tags):
            left_out.append((path.relative_to(root).as_posix(), tag))
        else:
            kept.append(path)
    if not kept:
        raise FileNotFoundError(f"{folder}: every {EVAL_TRIALS_FILE} belongs to an evaluation tagged "
                                f"{sorted({t for _, t in left_out})}, left out by exclude_tags={list(exclude_tags)}")
    return kept, left_out


def read_eval_rows(folder: Path, exclude_tags: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every row of every eval_trials.parquet under `folder` (or of the one file `folder` names),
    but those of evaluations whose tag matches a pattern of `exclude_tags` (eval_files).

    Files are read in sorted relative-path order; each row gets `source` = that relative path, so the
    result does not depend on where the folder lives. Raises FileNotFoundError when there is none.
    """
    import pyarrow.parquet as pq

    folder = Path(folder)
    root = folder.parent if folder.is_file() else folder
    files, _ = eval_files(folder, exclude_tags)
    rows: list[dict[str, Any]] = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        table = pq.read_table(path)
        missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
        if missing:
            raise EvalRowsError(f"{path}: missing column(s) {', '.join(missing)}")
        for i, row in enumerate(table.to_pylist()):
            _check_row(row, f"{path} row {i}")
            rows.append({**row, "source": rel})
    return rows


def protocol_name(protocol_id: str) -> str:
    """`eval70_v1__mixed__r4__3fa2c01b9e` -> `eval70_v1__mixed__r4` (ids of another shape: unchanged)."""
    parts = protocol_id.split("__")
    return "__".join(parts[:-1]) if len(parts) >= 4 else protocol_id


@dataclass(frozen=True)
class MethodTrials:
    """Every trial of one method on one protocol name (possibly several evaluations of it)."""

    method: str
    """The `method` column: what tables call it."""
    protocol_ids: tuple[str, ...]
    """Protocol ids its rows carry (one, unless the rows are not comparable)."""
    fingerprints: tuple[str, ...]
    """Protocol fingerprints its rows carry (one, unless the rows are not comparable)."""
    trials: tuple[Trial, ...]
    """Its trials, sorted by (benchmark, task, repeat, export)."""
    experiments: tuple[str, ...]
    """Experiment ids of the evaluated models."""
    exports: tuple[str, ...]
    """Export ids of the evaluated models."""
    sources: tuple[str, ...]
    """Relative paths of the files its rows came from."""

    @property
    def fingerprint(self) -> str:
        if len(self.fingerprints) != 1:
            raise ValueError(f"method {self.method}: rows carry {len(self.fingerprints)} fingerprints")
        return self.fingerprints[0]


def _method_trials(method: str, rows: Iterable[Mapping[str, Any]]) -> MethodTrials:
    rows = sorted(rows, key=lambda r: (r["benchmark"], r["task_id"], int(r["repeat"]), str(r.get("export_id") or ""),
                                       r["source"]))
    seen: dict[tuple[str, str, int], str] = {}
    for r in rows:
        key = (str(r.get("export_id") or ""), r["task_id"], int(r["repeat"]))
        if key in seen:
            raise EvalRowsError(f"method {method}: trial {key[1]}#{key[2]} of export {key[0] or '?'} appears twice "
                                f"({seen[key]} and {r['source']}): two evaluations of one export under one "
                                "protocol; leave the tagged one out (paper config exclude_tags, e.g. "
                                "'exclude_tags=[\"nightly-*\"]') or build from a folder holding one of them")
        seen[key] = r["source"]
    return MethodTrials(
        method=method,
        protocol_ids=tuple(sorted({r["protocol_id"] for r in rows})),
        fingerprints=tuple(sorted({r["fingerprint"] for r in rows})),
        trials=tuple(Trial.from_row(r) for r in rows),
        experiments=tuple(sorted({str(r.get("experiment_id") or "") for r in rows} - {""})),
        exports=tuple(sorted({str(r.get("export_id") or "") for r in rows} - {""})),
        sources=tuple(sorted({r["source"] for r in rows})),
    )


def group_by_protocol(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[MethodTrials]]:
    """protocol name -> its methods (sorted by method), protocol names sorted."""
    by: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[protocol_name(r["protocol_id"])][r["method"]].append(r)
    return {name: [_method_trials(m, rs) for m, rs in sorted(methods.items())] for name, methods in sorted(by.items())}

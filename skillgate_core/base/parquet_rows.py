"""Parquet rows with pyarrow alone: what the training and evaluation path reads and writes.

The GPU machine has pyarrow but not polars (its 54 MB wheel does not fit the 64 MiB a device call
carries), so every parquet file the sft -> rl-data-prep -> grpo -> eval70 -> paper path touches is
read and written here. The writer is fixed (zstd, statistics, one row group up to 1M rows, no
pandas metadata), so the same rows and schema give the same bytes with the same pyarrow version,
whether or not polars is installed. Readers elsewhere (polars on the CPU machine, the warehouse)
read these files as before: the column names, types and values are the ones the polars writer
produced (tests/rl/test_rl_data_prep.py reads and writes them).

    rows = read_rows(path)                                    # list of dicts, column order kept
    write_rows(rows, path, schema=pa.schema([...]))           # fixed schema (None = inferred, as polars did)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["read_columns", "read_rows", "write_rows"]

ROW_GROUP_SIZE = 1 << 20


def read_columns(path: str | os.PathLike[str]) -> list[str]:
    """The file's column names, in order (reads the footer only)."""
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def read_rows(path: str | os.PathLike[str], columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every row of a parquet file as a dict (lists as lists, structs as dicts, nulls as None)."""
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=list(columns) if columns is not None else None).to_pylist()


def write_rows(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str], schema: Any = None) -> Path:
    """Write `rows` to `path` (the folder is made). `schema`: a pyarrow schema (columns in its order,
    missing keys null); None infers it from the rows the way polars' DataFrame(rows) did (ints int64,
    floats double, str string, lists and dicts nested, column order of the first row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(rows)
    if schema is None:
        table = pa.Table.from_pylist(rows)
    else:
        table = pa.Table.from_pylist([{name: r.get(name) for name in schema.names} for r in rows], schema=schema)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target, compression="zstd", write_statistics=True, row_group_size=ROW_GROUP_SIZE,
                   store_schema=True)
    return target

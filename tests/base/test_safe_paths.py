"""Ids and paths read from a file are checked before they name a path (safe_paths: one rule, an
error naming the file and the field)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillgate_core.base.safe_paths import UnsafeNameError, check_id
from skillgate_core.benchgen.stats import read_task_rows
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.ownership.errors import InvalidName
from skillgate_core.ownership.layout import check_name


@pytest.mark.parametrize(("row", "field"), [({"task_id": "../../x", "path": "tasks/a"}, "task_id"),
                                            ({"task_id": "a", "path": "../../etc"}, "path"),
                                            ({"task_id": "a", "path": "/etc"}, "path"),
                                            ({"task_id": ".hidden", "path": "tasks/a"}, "task_id")])
def test_a_bench_index_row_that_would_name_a_path_outside_the_bench_is_refused(tmp_path: Path, row: dict,
                                                                                 field: str):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({**row, "split": "train"}) + "\n")
    with pytest.raises(UnsafeNameError, match=rf"tasks.jsonl line 1.*{field}"):
        load_bench_rows(tmp_path, "train")
    with pytest.raises(UnsafeNameError, match=rf"tasks.jsonl line 1.*{field}"):
        read_task_rows(tmp_path)


def test_one_name_rule_for_ids_from_files_and_owned_folders():
    for good in ("eval70_v1__mixed__r4", "task-01", "A.b_c"):
        assert check_id(good, source="f", field="x") == good == check_name("id", good)
    for bad in ("", ".", "..", "a/b", "-a", "a" * 129, "a\nb", None):
        with pytest.raises(UnsafeNameError, match=r"f: x .* cannot name a folder"):
            check_id(bad, source="f", field="x")
        with pytest.raises(InvalidName):
            check_name("id", bad)

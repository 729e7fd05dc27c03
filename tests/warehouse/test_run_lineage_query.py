"""The lineage query `skillgate run --execute` prints at its end runs as printed.

It used to print `... where sha256 in (...)`: a literal `(...)` a user pasted and DuckDB refused.
Here a run's evaluation output is on record (the realistic lineage of wh_scenario plus the rows the
eval run produced), the closing lines are printed as the CLI prints them, and the printed command
is run in a shell, as pasted.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from wh_scenario import T0, Scenario

from deployments.cli.run_fast import print_report_and_lineage
from warehouse import DatasetVersion, ingest, record

SKILLGATE = shutil.which("skillgate", path=str(Path(sys.executable).parent)) or "skillgate"


def test_the_printed_lineage_query_runs_as_printed(scenario: Scenario, tmp_path: Path) -> None:
    rows_sha = "ab" * 32
    record(DatasetVersion(sha256=rows_sha, uri=str(tmp_path / "rows"), dataset_kind="eval_rows", created_at=T0,
                          produced_by_run="eval-1"), state=scenario.state)
    ingest(scenario.state, lock_wait_s=10, db_wait_s=10)
    result = {"stages": {"eval70": {"outputs": {"eval_rows": str(tmp_path / "rows")},
                                    "output_digests": {"eval_rows": rows_sha}}}}
    out = io.StringIO()
    print_report_and_lineage(Console(file=out, width=80), result)  # narrow: a wrapped line must still paste
    text = out.getvalue()
    assert "exp-1" in text and "trial success 0.25" in text, text
    command = text.split("the query: ", 1)[1].strip()
    assert command.startswith("skillgate sql ") and "(...)" not in command
    env = {**os.environ, "SKILLGATE_HOME": str(scenario.state.home), "COLUMNS": "250",
           "PATH": f"{Path(SKILLGATE).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exp-1" in proc.stdout and "step-20" in proc.stdout and "1 row(s)" in proc.stdout, proc.stdout

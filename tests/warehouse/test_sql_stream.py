"""`skillgate sql --format csv|json` streams: the rows are fetched in batches as they are written, so a query
of millions of rows costs the memory of a batch, not of the result (3 million rows took 1.3 GB; 20 million,
5.1 GB). A real `skillgate sql` process on a real DuckDB file; its peak memory measured by a parent of its own."""

from __future__ import annotations

import json
import subprocess
import sys

from support.skillgate_cli import REPO, run_skillgate

MEASURE = """
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    subprocess.run([sys.executable, "-c", "from deployments.cli import main; main()", *sys.argv[2:]], stdout=out,
                   check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""
ROWS = 3_000_000
QUERY = f"select range as i, repeat('x', 100) as s from range({ROWS})"


def test_three_million_rows_of_csv_cost_a_batch_of_memory(tmp_path):
    env = {"SKILLGATE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = tmp_path / "rows.csv"
    done = subprocess.run([sys.executable, "-c", MEASURE, str(out), "sql", QUERY, "--format", "csv"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    peak_mib = int(done.stdout.strip())
    assert peak_mib < 400, peak_mib
    with out.open() as fh:
        assert fh.readline() == "i,s\n" and fh.readline() == f"0,{'x' * 100}\n"
        assert sum(1 for _ in fh) == ROWS - 1


def test_streamed_json_and_csv_are_the_rows_with_the_limit_said(tmp_path):
    home = tmp_path / "home"
    for fmt in ("json", "csv"):
        done = run_skillgate("sql", "select range as i, 'r' || range as s from range(25005)", "--format", fmt,
                             "--limit", "25001", home=home)
        assert done.returncode == 0, done.stderr
        assert "printed 25001 of 25005 rows" in done.stderr
        if fmt == "json":
            rows = json.loads(done.stdout)
            assert rows[0] == {"i": 0, "s": "r0"} and rows[-1] == {"i": 25000, "s": "r25000"} and len(rows) == 25001
        else:
            assert done.stdout.splitlines()[-1] == "25000,r25000" and len(done.stdout.splitlines()) == 25002
    empty = run_skillgate("sql", "select 1 as x where false", "--format", "json", home=home)
    assert empty.returncode == 0 and json.loads(empty.stdout) == []

"""Benchmark: the metric lineage query over a warehouse holding 1,000,000 eval_trial rows.

    .venv/bin/python benchmarks/lineage_query.py                 # writes benchmarks/results/lineage_query.json
    .venv/bin/python benchmarks/lineage_query.py --rows 200000 --repeats 10 --out /tmp/x.json

It builds a real warehouse file (the shipped migrations: tables, keys, views, macros) in a temp
folder and fills it with DuckDB itself (synthetic but shaped like the real thing: experiments,
runs with configs and inputs, an upstream chain of datasets, segments, exports, protocols,
evaluations of 280 trials each until --rows trials, 12 metrics per evaluation), every foreign key
checked on insert. Then, over random metric ids, it times:

  metric_lineage_warm   `warehouse.metric_lineage(con, id)` on an open read-only connection: the
                        one query answering "which export, from which data, config and commit,
                        produced this number", including the trial counts behind it (target < 200 ms)
  metric_lineage_cold   open read-only + that query + close (what one `skillgate sql` pays)
  lineage_tree_warm     `warehouse.lineage_tree(con, id)`: the whole chain `skillgate lineage` prints
  dataset_upstream_warm the recursive upstream of an export's weights

The JSON result holds the command, git commit and dirty flag, machine, row counts, and the
median / p95 / min / max of each timing in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from warehouse.migrate import migrate  # noqa: E402
from warehouse.provenance import git_state  # noqa: E402
from warehouse.queries import dataset_upstream, lineage_tree, metric_lineage  # noqa: E402

TRIALS_PER_EVAL = 280
METRICS = ("trial_success", "pass_at_4", "read_rate", "p_resolved_read", "p_resolved_no_read",
           "oracle_exposure", "misleading_exposure", "clean_oracle_rate", "unique_reads", "errors",
           "skill_reasoning_rate", "tasks_4_of_4")
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "lineage_query.json"


def populate(con: duckdb.DuckDBPyConnection, n_trials: int) -> dict[str, int]:
    """Fill a migrated warehouse with synthetic lineage; returns row counts."""
    n_eval = -(-n_trials // TRIALS_PER_EVAL)
    n_exp, n_runs = 10, 200
    n_exports = max(1, min(1000, n_eval))
    sql = f"""
    insert into experiment select 'exp-' || i, 'grpo:skillgate', 'rl_train', 'sft-merged', 'h', '/x/exp-' || i,
        timestamptz '2025-01-01 00:00:00+00' + i * interval 1 hour from range({n_exp}) t(i);
    insert into config select sha256('cfg' || i), 'GrpoConfig', json_object('lr', 1e-6 * (i + 1), 'seed', i)
        from range(50) t(i);
    -- 40 data-prep runs (no experiment) produce the datasets the 200 training runs read
    insert into run select 'prep-' || i, 'rl-data-prep', null, 'cli', null, repeat('a', 40), false,
        sha256('cfg' || (i % 50)), timestamptz '2025-01-01 00:00:00+00' from range(40) t(i);
    insert into run_end select 'prep-' || i, 'completed', false, timestamptz '2025-01-01 01:00:00+00', null, null
        from range(40) t(i);
    insert into dataset_version select sha256('bench' || i), '/d/bench-' || i, 'bench', null,
        timestamptz '2025-01-01 00:00:00+00' from range(40) t(i);
    insert into run_input select 'prep-' || i, 'bench', sha256('bench' || i) from range(40) t(i);
    insert into dataset_version select sha256('rl' || i), '/d/rl-' || i, 'rl_data', 'prep-' || i,
        timestamptz '2025-01-01 01:00:00+00' from range(40) t(i);
    insert into run select 'run-' || i, 'grpo', 'exp-' || (i % {n_exp}), (['ui','schedule','cli','test'])[1 + i % 4],
        'flow-' || i, substr(sha256('git' || (i % 7)), 1, 40), i % 5 = 0, sha256('cfg' || (i % 50)),
        timestamptz '2025-01-02 00:00:00+00' + i * interval 1 minute from range({n_runs}) t(i);
    insert into run_end select 'run-' || i, 'completed', false, timestamptz '2025-01-03 00:00:00+00', null, null
        from range({n_runs}) t(i);
    insert into run_input select 'run-' || i, 'rl_data', sha256('rl' || (i % 40)) from range({n_runs}) t(i);
    insert into run_input select 'run-' || i, 'bench', sha256('bench' || (i % 40)) from range({n_runs}) t(i);
    insert into segment select 'exp-' || (i % {n_exp}) || '/seg-' || i, 'seg-' || i, 'run-' || i, 'exp-' || (i % {n_exp}),
        i // {n_exp}, 'host', 1000 + i, null, null, timestamptz '2025-01-02 00:00:00+00', null from range({n_runs}) t(i);
    insert into dataset_version select sha256('w' || i), '/x/export-' || i, 'model_export', 'run-' || (i % {n_runs}),
        timestamptz '2025-01-03 00:00:00+00' from range({n_exports}) t(i);
    insert into model_export select 'exp-' || (i % {n_runs} % {n_exp}) || '/export-' || i, 'export-' || i,
        'exp-' || (i % {n_runs} % {n_exp}), 'run-' || (i % {n_runs}),
        'exp-' || (i % {n_runs} % {n_exp}) || '/seg-' || (i % {n_runs}), 100 * (i // {n_runs}), '/x/export-' || i,
        sha256('w' || i), true, timestamptz '2025-01-03 00:00:00+00' from range({n_exports}) t(i);
    insert into eval_protocol values ('eval70_v1-mixed-4-0123456789', 'eval70_v1', '{{"repeats":4}}',
        timestamptz '2025-01-01 00:00:00+00');
    insert into evaluation (eval_id, export_id, protocol_fingerprint, run_id, dataset_sha256, uri, started_at)
        select 'ev-' || i, e.export_id, 'eval70_v1-mixed-4-0123456789', null,
        sha256('bench' || (i % 40)), '/x/eval-' || i, timestamptz '2025-01-04 00:00:00+00'
        from range({n_eval}) t(i)
        join (select export_id, row_number() over (order by export_id) - 1 as k from model_export) e
          on e.k = i % {n_exports};
    insert into evaluation_end select eval_id, 'completed', timestamptz '2025-01-05 00:00:00+00' from evaluation;
    insert into eval_trial (eval_id, row_id, trial_index, task_id, benchmark, "repeat", outcome, reward, n_turns,
        n_reads) select 'ev-' || (i // {TRIALS_PER_EVAL}), 'row-' || (i % {TRIALS_PER_EVAL}),
        i % {TRIALS_PER_EVAL}, 'task-' || (i % 70), (['procedural','abductive','constraint','planning'])[1 + i % 4],
        (i // 70) % 4, (['resolved','fail','error','fail'])[1 + (hash(i) % 4)::bigint], (hash(i) % 100)::bigint / 100.0,
        1 + i % 9, i % 3 from range({n_trials}) t(i);
    insert into eval_metric select e.eval_id || '/' || m.name, e.eval_id, e.export_id, e.dataset_sha256, m.name,
        'all', 0.5, 280 from evaluation e cross join (select unnest({list(METRICS)}) as name) m;
    """
    con.execute(sql)
    con.execute("checkpoint")
    tables = ("experiment", "config", "run", "segment", "dataset_version", "run_input", "model_export",
              "evaluation", "eval_trial", "eval_metric")
    return {t: int(con.execute(f"select count(*) from {t}").fetchone()[0]) for t in tables}  # type: ignore[index]


def timed(fn: Callable[[], object], repeats: int) -> dict[str, float]:
    fn()  # warm-up: first-use costs (plan caches, buffer loads) are not the steady state
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"median_ms": round(statistics.median(samples), 2), "p95_ms": round(p95, 2),
            "min_ms": round(samples[0], 2), "max_ms": round(samples[-1], 2), "repeats": repeats}


def python_exe() -> str:
    """This interpreter, relative to the repo when inside it (for the result's command line)."""
    exe = Path(sys.executable)
    return str(exe.relative_to(REPO)) if exe.is_relative_to(REPO) else str(exe)


def result_header(name: str, load_avg_1m: float) -> dict[str, Any]:
    """The first keys of a warehouse benchmark's JSON: its name, command line, commit and machine."""
    git = git_state()
    return {
        "benchmark": name,
        "command": " ".join([python_exe(), *sys.argv]),
        "git": {"commit": git.sha, "dirty": git.dirty},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "duckdb": duckdb.__version__, "load_avg_1m": load_avg_1m},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="eval_trial rows")
    ap.add_argument("--repeats", type=int, default=30, help="timed runs per query")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sg-lineage-bench-"))
    db = work / "warehouse.duckdb"
    try:
        t0 = time.perf_counter()
        con = duckdb.connect(str(db))
        con.execute("set TimeZone = 'UTC'")
        migrate(con)
        counts = populate(con, args.rows)
        con.close()
        build_s = time.perf_counter() - t0

        rng = random.Random(args.seed)
        ro = duckdb.connect(str(db), read_only=True)
        metric_ids = [r[0] for r in ro.execute("select metric_id from eval_metric").fetchall()]
        export_shas = [r[0] for r in ro.execute("select weights_sha256 from model_export").fetchall()]
        check = metric_lineage(ro, metric_ids[0])
        assert check is not None and check["n_trials"] == TRIALS_PER_EVAL and check["git_sha"] and check["inputs"]

        timings = {
            "metric_lineage_warm": timed(lambda: metric_lineage(ro, rng.choice(metric_ids)), args.repeats),
            "lineage_tree_warm": timed(lambda: lineage_tree(ro, rng.choice(metric_ids)), args.repeats),
            "dataset_upstream_warm": timed(lambda: dataset_upstream(ro, rng.choice(export_shas)), args.repeats),
        }
        ro.close()

        def cold() -> None:
            c = duckdb.connect(str(db), read_only=True)
            try:
                metric_lineage(c, rng.choice(metric_ids))
            finally:
                c.close()

        timings["metric_lineage_cold"] = timed(cold, args.repeats)
        size_mb = db.stat().st_size / 2**20
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {
        **result_header("lineage_query", round(os.getloadavg()[0], 2)),
        "rows": counts,
        "eval_trial_rows": counts["eval_trial"],
        "build_seconds": round(build_s, 1),
        "file_mb": round(size_mb, 1),
        "timings": timings,
        "target": {"query": "metric_lineage_warm", "p95_ms_below": 200},
        "meets_target": timings["metric_lineage_warm"]["p95_ms"] < 200,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A stage run whose process is killed is found (host + pid + start stamp), marked `interrupted`, and its
temp output folder removed; until then `warehouse verify` and `warehouse status` say so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
from support.skillgate_cli import REPO, run_skillgate

from skillgate_core.base.paths import StateLayout
from skillgate_core.base.processes import current_process, process_start, process_state
from skillgate_core.policy.tiny_model import TinyModelConfig
from warehouse import RunStarted, SegmentStarted, StageRunRecorder, query, record, verify, warehouse_status
from warehouse.interrupted import mark_interrupted
from warehouse.migrate import migrations
from warehouse.spool import event_log, list_rejected

# A real stage run (recorder + run_stage) whose stage function writes a partial output, says it is
# ready, and hangs until it is SIGKILLed.
HANGING_STAGE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import skillgate_core.policy.init_model as init

    def hang(config, inputs, out_dir):
        (out_dir / "partial.bin").write_bytes(b"half a model")
        Path(sys.argv[1]).write_text("ready")
        time.sleep(600)

    init.build_tiny_model = hang
    from skillgate_core.base.paths import state_layout
    from skillgate_core.pipeline.run import run_stage
    from warehouse import StageRunRecorder

    config = init.InitModelConfig()
    StageRunRecorder.start("init-model", config, trigger="test")
    run_stage("init-model", config, {}, state_layout())
""")


def _kill_a_stage_run(state: StateLayout, tmp_path: Path) -> int:
    ready = tmp_path / "ready"
    env = {**os.environ, "SKILLGATE_HOME": str(state.home), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", HANGING_STAGE, str(ready)], cwd=REPO, env=env)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, "the stage process died before it was ready"
        assert time.monotonic() < deadline, "the stage process never got ready"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.pid


def _temp_dirs(state: StateLayout) -> list[Path]:
    stage_dir = state.artifacts / "init-model"
    return sorted(p for p in stage_dir.iterdir() if p.name.startswith(".")) if stage_dir.is_dir() else []


def test_a_sigkilled_stage_run_is_reported_then_marked_interrupted_and_cleaned(state: StateLayout, tmp_path: Path):
    pid = _kill_a_stage_run(state, tmp_path)
    assert query("select status from v_run", state=state).rows == [("running",)]
    assert _temp_dirs(state), "the killed run left its temp output folder"

    # Until it is marked, verify and status say that the run's process is gone.
    report = verify(state, digests=False)
    kinds = {d.kind for d in report.drift}
    assert not report.ok and {"dead-run", "stale-build"} <= kinds, report.drift
    dead = next(d for d in report.drift if d.kind == "dead-run")
    assert f"pid {pid}" in dead.detail and "skillgate warehouse reap" in dead.detail
    assert warehouse_status(state).dead_runs == 1
    cli = run_skillgate("warehouse", "verify", "--quick", home=state.home)
    assert cli.returncode == 1 and "dead-run" in cli.stdout and "Traceback" not in cli.stderr

    cli = run_skillgate("warehouse", "reap", home=state.home)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "marked 1 run(s) interrupted" in cli.stdout and "removed 1 temp output folder(s)" in cli.stdout

    (status, error), = query("select status, error from v_run", state=state).rows
    assert status == "interrupted" and f"pid {pid}" in error
    assert query("select exit_reason from v_segment", state=state).rows == [("interrupted",)]
    assert _temp_dirs(state) == [] and not list((state.artifacts / "init-model").iterdir())
    assert verify(state, digests=False).ok
    st = warehouse_status(state)
    assert st.runs == {"interrupted": 1} and st.dead_runs == 0
    cli = run_skillgate("warehouse", "status", home=state.home)
    assert "interrupted" in cli.stdout and cli.returncode == 0


def _running(state: StateLayout, run_id: str, host: str, pid: int, start: str | None) -> None:
    record(RunStarted(run_id=run_id, stage="init-model", trigger="test", git_sha="unknown", git_dirty=False,
                      config_digest="0" * 64, config_type="TinyModelConfig", config_body={},
                      started_at="2025-01-01T00:00:00Z"),
           SegmentStarted(segment_id=run_id, run_name=run_id, run_id=run_id, ordinal=0, host=host, pid=pid,
                          started_at="2025-01-01T00:00:00Z", process_start=start),
           state=state)


def test_a_reused_pid_is_not_mistaken_for_the_dead_run(state: StateLayout):
    me = current_process()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    boot, ns, ticks = me.start.split("/")
    _running(state, "alive", me.host, me.pid, me.start)                             # this very process
    _running(state, "reused", me.host, me.pid, f"{boot}/{ns}/{int(ticks) - 1}")      # same pid, older process
    _running(state, "exited", me.host, dead_pid, process_start(dead_pid) or None)    # pid no longer exists
    _running(state, "elsewhere", "another-host", 1, None)                           # cannot be checked here
    _running(state, "rebooted", me.host, me.pid, f"00000000-dead-boot/{ns}/{ticks}")  # an earlier boot
    assert process_state(me.host, me.pid, me.start) == "alive"

    report = mark_interrupted(state)
    assert sorted(d.run_id for d in report.marked) == ["exited", "rebooted", "reused"]
    rows = dict(query("select run_id, status from v_run", state=state).rows)
    assert rows == {"alive": "running", "reused": "interrupted", "exited": "interrupted",
                    "elsewhere": "running", "rebooted": "interrupted"}
    # A second sweep (or a concurrent one) finds nothing left to mark and refuses nothing.
    assert mark_interrupted(state).marked == []
    assert list_rejected(event_log(state)) == []


def test_the_next_stage_run_marks_dead_runs_by_itself(state: StateLayout):
    me = current_process()
    boot, ns, ticks = me.start.split("/")
    _running(state, "reused", me.host, me.pid, f"{boot}/{ns}/{int(ticks) - 1}")
    run = StageRunRecorder.start("init-model", TinyModelConfig(), trigger="test", state=state)
    rows = dict(query("select run_id, status from v_run", state=state).rows)
    assert rows == {"reused": "interrupted", run.run_id: "running"}
    seg = query("select process_start from segment where run_id = ?", [run.run_id], state=state).rows
    assert seg == [(me.start,)]


def test_a_warehouse_of_the_previous_schema_is_migrated_with_its_rows(state: StateLayout):
    """Migration 003 swaps run_end for a table that accepts 'interrupted': rows and keys survive."""
    state.home.mkdir(parents=True)
    con = duckdb.connect(str(state.warehouse_file))
    for m in migrations()[:2]:
        con.execute(m.sql)
        con.execute("insert into schema_version values (?, ?, now())", [m.version, m.name])
    con.execute("insert into config values (?, 'C', '{}')", ["0" * 64])
    con.execute("insert into run (run_id, stage, \"trigger\", git_sha, git_dirty, config_digest, started_at) "
                "values ('r1', 'sft', 'cli', 'unknown', false, ?, now())", ["0" * 64])
    con.execute("insert into run_end values ('r1', 'failed', false, now(), 'boom', null)")
    con.close()
    assert query("select run_id, status, error from v_run", state=state).rows == [("r1", "failed", "boom")]
    assert query("select max(version) from schema_version", state=state).rows == [(len(migrations()),)]
    cols = [r[0] for r in query("select column_name from information_schema.columns where table_name = 'segment'",
                                state=state).rows]
    assert "process_start" in cols
    assert verify(state, digests=False).checked["runs"] == 1


def test_a_dead_training_run_ends_its_experiment_segment_on_disk_too(state: StateLayout):
    from skillgate_core.ownership import (
        create_experiment,
        experiment_dir,
        experiments_root,
        load_segment,
        save_checkpoint,
        start_segment,
    )
    from warehouse import experiment_created

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    root = experiments_root(state)
    record(experiment_created(create_experiment(root, "exp-1", algorithm="grpo", data="d", init="i", hypothesis="h"),
                              root), state=state)
    seg = start_segment(root, "run-a", experiment_id="exp-1", pid=int(gone.stdout))  # a trainer that died
    run = StageRunRecorder.start("grpo", TinyModelConfig(), trigger="test", segment=seg, state=state)
    assert {d.kind for d in verify(state, digests=False).drift} == {"dead-run"}
    # what it left before it died: checkpoint 1 and two metric rows (its task never recorded them)
    save_checkpoint(root, "exp-1", "run-a", 1, lambda d: (d / "state.bin").write_bytes(b"s1"))
    experiment_dir(root, "exp-1").metrics_file("run-a").write_text('{"step": 0, "reward": 0.5}\n{"step": 1, "reward": 0.75}\n{"st')
    assert {d.kind for d in verify(state, digests=False).drift} == {"dead-run", "missing-in-warehouse", "mismatch"}

    (marked,) = mark_interrupted(state).marked
    assert marked.run_id == run.run_id and "judged by the pid alone" in marked.detail()
    assert load_segment(experiment_dir(root, "exp-1"), "run-a").exit_reason == "interrupted"
    assert query("select exit_reason from v_segment", state=state).rows == [("interrupted",)]
    assert query("select checkpoint_id, run_id from checkpoint", state=state).rows == [
        ("exp-1/run-a/step_00000001", run.run_id)]
    assert query("select step, value from training_metric order by step", state=state).rows == [(0, 0.5), (1, 0.75)]
    assert verify(state, digests=False).ok

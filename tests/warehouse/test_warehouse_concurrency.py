"""Several processes write at once: no row lost, nobody crashes, readers are not locked out for long."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import time
from pathlib import Path

from skillgate_core.base.paths import StateLayout, state_layout
from warehouse import RunStarted, ingest, query, read_connection, record, warehouse_status

WRITERS = 4
WRITES = 200


def _run_event(worker: int, i: int) -> RunStarted:
    cfg = i % 10  # the same 10 configs from every process: concurrent idempotent config inserts
    return RunStarted(
        run_id=f"w{worker}-{i:04d}", stage="sft", trigger="test", git_sha="unknown", git_dirty=True,
        config_digest=hashlib.sha256(f"cfg{cfg}".encode()).hexdigest(), config_type="SftConfig",
        config_body={"cfg": cfg}, started_at="2025-01-01T00:00:00Z",
    )


def _writer(home: str, worker: int, start: mp.synchronize.Event, errors: mp.Queue) -> None:
    os.environ["SKILLGATE_HOME"] = home
    state = state_layout(home)
    start.wait(30)
    try:
        for i in range(WRITES):
            record(_run_event(worker, i), state=state)  # append + non-blocking ingest attempt
    except BaseException as exc:  # reported to the parent: the test asserts there are none
        errors.put(f"worker {worker}: {type(exc).__name__}: {exc}")
        raise


def test_four_processes_times_200_writes_lose_nothing(state: StateLayout):
    ctx = mp.get_context("spawn")  # fresh interpreters: no DuckDB state inherited through fork
    start, errors = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(state.home), w, start, errors)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    t0 = time.perf_counter()
    start.set()
    # a reader polls the whole time: it must never fail, only wait briefly
    reads = 0
    while any(p.is_alive() for p in procs):
        if state.warehouse_file.exists():
            query("select count(*) from run", state=state, ingest_first=False)
            reads += 1
        time.sleep(0.1)
    for p in procs:
        p.join(60)
    seconds = time.perf_counter() - t0
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == [] and [p.exitcode for p in procs] == [0] * WRITERS

    report = ingest(state, lock_wait_s=10, db_wait_s=10)  # whatever the last writer left pending
    assert report.rejected == 0 and report.pending == 0
    res = query("select count(*), count(distinct run_id), count(distinct config_digest) from run", state=state)
    assert res.rows == [(WRITERS * WRITES, WRITERS * WRITES, 10)]
    s = warehouse_status(state)
    assert (s.pending, s.rejected, s.archived) == (0, 0, WRITERS * WRITES)
    print(f"\n{WRITERS}x{WRITES} writes in {seconds:.1f} s, {reads} concurrent reads")


def test_a_reader_holding_the_file_only_delays_ingest(state: StateLayout):
    record(_run_event(0, 0), state=state)
    with read_connection(state) as con:  # holds DuckDB's shared lock: no writer can open the file
        path = record(_run_event(0, 1), state=state)  # must not raise, must not block for long
        assert path.exists(), "the event waits in the spool"
        assert con.execute("select count(*) from run").fetchone() == (1,)
    res = query("select count(*) from run", state=state)  # the next reader ingests first
    assert res.rows == [(2,)] and res.pending == 0
    assert not Path(path).exists()

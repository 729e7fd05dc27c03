"""Exports: built in a temp folder, validated, published by rename; a SIGKILL never leaves half of one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_models import write_model, write_safetensors

from skillgate_core.base.digests import path_sha256
from skillgate_core.ownership import (
    ExportExists,
    ExportInvalid,
    UnknownSegment,
    build_export,
    experiment_dir,
    list_exports,
    load_export,
    stale_builds,
    start_segment,
)
from skillgate_core.ownership.layout import COMPLETE_MARKER, LINEAGE_FILE, TMP_PREFIX

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def segment(root: Path, experiment: str) -> str:
    start_segment(root, "run-a", experiment_id=experiment)
    return "run-a"


def _no_temp_left(root: Path) -> bool:
    exports = experiment_dir(root, "exp-1").exports
    return not exports.exists() or not any(p.name.startswith(TMP_PREFIX) for p in exports.iterdir())


def test_single_file_export_is_published_with_lineage_and_digest(root: Path, segment: str, model_writer):
    rec = build_export(root, "exp-1", "step-100", run_name=segment, step=100, write=model_writer(),
                       lineage={"run_id": "grpo-1", "config_digest": "c" * 64})
    final = experiment_dir(root, "exp-1").export("step-100")
    assert rec.path == str(final) and (final / COMPLETE_MARKER).is_file()
    assert rec.weights_sha256 == path_sha256(final)  # what a downstream stage will digest as its input
    lineage = json.loads((final / LINEAGE_FILE).read_text())
    assert lineage["export_id"] == "step-100" and lineage["run_name"] == "run-a" and lineage["step"] == 100
    assert lineage["lineage"]["run_id"] == "grpo-1"
    assert [x.export_id for x in list_exports(experiment_dir(root, "exp-1"))] == ["step-100"]
    assert _no_temp_left(root)


def test_sharded_export_with_index_is_valid(root: Path, segment: str, model_writer):
    shards = {"model-00001-of-00002.safetensors": ["a.weight", "b.weight"],
              "model-00002-of-00002.safetensors": ["c.weight"]}
    rec = build_export(root, "exp-1", "sharded", run_name=segment, step=5, write=model_writer(shards))
    assert load_export(experiment_dir(root, "exp-1"), "sharded", digest=True).weights_sha256 == rec.weights_sha256


BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {}


def _case(name: str, problem: str):
    def deco(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        BROKEN[name] = (fn, problem)
        return fn
    return deco


SHARDS = {"model-00001-of-00002.safetensors": ["a.weight"], "model-00002-of-00002.safetensors": ["c.weight"]}


@_case("no config", "config.json missing")
def _no_config(d: Path) -> None:
    write_model(d, SHARDS, config=False)


@_case("missing shard", "shard model-00002-of-00002.safetensors missing")
def _missing_shard(d: Path) -> None:
    write_model(d, SHARDS)
    (d / "model-00002-of-00002.safetensors").unlink()


@_case("keys differ from index", "keys differ from the index")
def _keys_differ(d: Path) -> None:
    write_model(d, SHARDS)
    write_safetensors(d / "model-00002-of-00002.safetensors", ["c.weight", "surprise.weight"])


@_case("truncated shard", "truncated")
def _truncated(d: Path) -> None:
    write_model(d, SHARDS)
    write_safetensors(d / "model-00001-of-00002.safetensors", ["a.weight"], truncate=2)


@_case("stray shard", "shards not named by")
def _stray(d: Path) -> None:
    write_model(d, SHARDS)
    write_safetensors(d / "model-00003-of-00002.safetensors", ["z.weight"])


@_case("no weights", "no weights")
def _no_weights(d: Path) -> None:
    (d / "config.json").write_text("{}")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_invalid_exports_are_never_published(root: Path, segment: str, case: str):
    write, problem = BROKEN[case]
    with pytest.raises(ExportInvalid, match=problem) as info:
        build_export(root, "exp-1", "bad", run_name=segment, step=1, write=write)
    assert info.value.code == "E_EXPORT_INVALID" and info.value.problems
    assert not experiment_dir(root, "exp-1").export("bad").exists()
    assert _no_temp_left(root)


def test_a_failing_writer_publishes_nothing(root: Path, segment: str):
    def write(d: Path) -> None:
        (d / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_export(root, "exp-1", "x", run_name=segment, step=1, write=write)
    assert list_exports(experiment_dir(root, "exp-1")) == [] and _no_temp_left(root)


def test_export_ids_are_never_overwritten_and_need_a_segment(root: Path, segment: str, model_writer):
    build_export(root, "exp-1", "step-1", run_name=segment, step=1, write=model_writer())
    with pytest.raises(ExportExists):
        build_export(root, "exp-1", "step-1", run_name=segment, step=1, write=model_writer())
    with pytest.raises(UnknownSegment):
        build_export(root, "exp-1", "step-2", run_name="run-zz", step=2, write=model_writer())


_CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from fake_models import write_model
    from skillgate_core.ownership import build_export
    import skillgate_core.base.atomic as atomic

    root, moment, ready = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

    def hang():
        ready.write_text("ready")
        time.sleep(60)

    def write(folder):
        write_model(folder, {{"model-00001-of-00002.safetensors": ["a"], "model-00002-of-00002.safetensors": ["b"]}})
        if moment == "during-write":
            (folder / "model-00002-of-00002.safetensors").unlink()  # half of the shards written
            hang()

    if moment == "before-rename":
        real_rename = atomic.os.rename
        def slow_rename(src, dst):
            hang()  # validated and COMPLETE, but not yet renamed
            real_rename(src, dst)
        atomic.os.rename = slow_rename

    build_export(root, "exp-1", "step-50", run_name="run-a", step=50, write=write)
""")


@pytest.mark.parametrize("moment", ["during-write", "before-rename"])
def test_sigkill_mid_export_leaves_no_visible_export_and_a_retry_succeeds(
    root: Path, segment: str, model_writer, tmp_path: Path, moment: str
):
    ready = tmp_path / f"ready-{moment}"
    code = _CHILD.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", code, str(root), moment, str(ready)], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, f"child exited early with {child.returncode}"
            assert time.monotonic() < deadline, "child never reached the kill point"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    exp = experiment_dir(root, "exp-1")
    assert not exp.export("step-50").exists(), "a killed build must not be visible under its final name"
    assert list_exports(exp) == []
    leftovers = stale_builds(exp.exports)
    assert len(leftovers) == 1 and leftovers[0].name.startswith(TMP_PREFIX + "step-50-")

    rec = build_export(root, "exp-1", "step-50", run_name=segment, step=50, write=model_writer())
    assert (Path(rec.path) / COMPLETE_MARKER).is_file()
    assert [x.export_id for x in list_exports(exp)] == ["step-50"]
    assert stale_builds(exp.exports) == [], "the retry cleans up the dead build"

"""benchmarks/results holds results, not raw output: no run log or per-episode sample is a tracked file (each
result folder packs them into its raw.tar.xz, benchmarks/pack_raw_results.py), and the summaries, tables and
rows a build recomputes stay readable files."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import pack_raw_results  # noqa: E402


def _tracked_results() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=REPO, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return [Path(line) for line in out.splitlines()]


def test_no_raw_file_is_tracked_and_the_rows_a_build_reads_are():
    tracked = _tracked_results()
    raw = [str(p) for p in tracked if pack_raw_results.is_raw(p.relative_to("benchmarks/results"))]
    assert raw == [], f"{len(raw)} raw files tracked (pack them: benchmarks/pack_raw_results.py): {raw[:5]}"
    names = {p.name for p in tracked}
    assert {"eval_trials.parquet", "metrics.jsonl", "credit_episodes.jsonl", "summary.json", "README.md"} <= names


def test_every_archive_holds_raw_files_only():
    archives = [REPO / p for p in _tracked_results() if p.name == pack_raw_results.ARCHIVE]
    assert archives
    for archive in archives:
        with tarfile.open(archive, "r:xz") as tar:
            members = [Path(m.name) for m in tar.getmembers() if m.isfile()]
        assert members and all(pack_raw_results.is_raw(m) for m in members), archive


def test_pack_moves_raw_files_in_keeps_the_rest_and_merges_a_later_pack(tmp_path: Path):
    def folder(root: Path) -> Path:
        (root / "eval" / "sft" / "samples").mkdir(parents=True)
        (root / "logs").mkdir()
        (root / "logs" / "run.log").write_text("step 1\n")
        (root / "eval" / "sft" / "samples" / "t--r0.json").write_text("{}")
        (root / "eval" / "sft" / "summary.json").write_text('{"n": 1}')
        return root

    one, two = folder(tmp_path / "one"), folder(tmp_path / "two")
    archive, count = pack_raw_results.pack(one)
    assert count == 2 and not (one / "logs" / "run.log").exists() and (one / "eval" / "sft" / "summary.json").is_file()
    assert pack_raw_results.pack(two)[0].read_bytes() == archive.read_bytes()  # the same files, the same bytes
    (one / "later.log").write_text("x\n")
    assert pack_raw_results.pack(one)[1] == 1
    with tarfile.open(archive, "r:xz") as tar:
        assert sorted(tar.getnames()) == ["eval/sft/samples/t--r0.json", "later.log", "logs/run.log"]
        assert tar.extractfile("logs/run.log").read() == b"step 1\n"
    assert pack_raw_results.pack(one)[1] == 0

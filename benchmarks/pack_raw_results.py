"""Pack a result folder's raw files into one RESULT/raw.tar.xz before it is committed.

    .venv/bin/python benchmarks/pack_raw_results.py benchmarks/results/gpu/learning_smollm2_abc1234

Raw = the run logs (`*.log`) and the per-episode trajectory samples (`.../samples/*`) anywhere under the
folder: nothing reads them but a person. Summaries, tables, figures and the rows a build recomputes (parquet,
metrics.jsonl, credit_episodes.jsonl) stay files (benchmarks/results/README.md). The archive keeps paths
relative to the folder and is byte-for-byte repeatable (sorted, fixed mtime and owner); the packed files are
removed. A folder that already has a raw.tar.xz gets its new raw files added to it.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ARCHIVE = "raw.tar.xz"
FIXED_MTIME = 1796601600  # 2026-12-07 00:00 UTC: the archive's bytes depend on the files only


def is_raw(relative: Path) -> bool:
    """A run log or a per-episode sample (what `tests/benchmarks/test_results_layout.py` keeps out of git)."""
    return relative.suffix == ".log" or "samples" in relative.parts[:-1]


def raw_files(folder: Path) -> list[Path]:
    """The raw files under `folder`, relative to it, sorted."""
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and is_raw(p.relative_to(folder)))


def pack(folder: Path) -> tuple[Path, int]:
    """Pack `folder`'s raw files into folder/raw.tar.xz (merged with an existing one); returns (archive, count)."""
    if not folder.is_dir():
        raise SystemExit(f"{folder}: not a folder")
    new = raw_files(folder)
    archive = folder / ARCHIVE
    if not new:
        return archive, 0
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        if archive.exists():
            with tarfile.open(archive, "r:xz") as old:
                old.extractall(stage, filter="data")
        for rel in new:
            if (stage / rel).exists():
                raise SystemExit(f"{folder / rel}: {archive} already holds a member of that name")
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / rel, stage / rel)
        members = sorted(p.relative_to(stage) for p in stage.rglob("*") if p.is_file())
        partial = folder / (ARCHIVE + ".part")
        with lzma.open(partial, "wb", preset=9 | lzma.PRESET_EXTREME) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
            for rel in members:
                info = tar.gettarinfo(stage / rel, arcname=rel.as_posix())
                info.mtime, info.uid, info.gid, info.uname, info.gname = FIXED_MTIME, 0, 0, "", ""
                with open(stage / rel, "rb") as f:
                    tar.addfile(info, f)
        partial.replace(archive)  # whole or not at all: the raw files go only once it is written
    for rel in new:
        (folder / rel).unlink()
    return archive, len(new)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path, help="result folders (e.g. benchmarks/results/gpu/NAME)")
    args = p.parse_args(argv)
    for folder in args.folders:
        archive, count = pack(folder)
        print(f"{archive}: {count} raw file(s) packed" if count else f"{folder}: no raw files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Recompute every committed GRPO-step-vs-TRL ratio with one timing convention on both sides.

    .venv/bin/python benchmarks/gpu/recompute_ratios.py        # writes benchmarks/results/gpu/ratios_recomputed/

Each committed grpo_step_vs_trl JSON that printed a ratio has the TRL anchor's log beside it; TRL's
per-step `step_time` and `completions/mean_length` are in that log, our per-step wall time and tokens
in the JSON's records. The printed ratio set our steady figure (after the warm-up step) against TRL's
wall clock including its first step; this recomputes both steady against steady and end to end over the
same first n steps (ratios.py), from those files alone. No GPU, no new measurement.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ratios  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "gpu"


def read_text(path: Path) -> str:
    """A committed log: the file itself, or its member in the raw.tar.xz of a folder above it (the raw files
    of a result folder are packed there: benchmarks/pack_raw_results.py)."""
    if path.exists():
        return path.read_text()
    for folder in path.parents:
        archive = folder / "raw.tar.xz"
        if archive.exists():
            with tarfile.open(archive, "r:xz") as tar:
                try:
                    member = tar.extractfile(str(path.relative_to(folder)))
                except KeyError:
                    member = None
                if member is not None:
                    return member.read().decode()
        if folder == RESULTS.parent:
            break
    raise FileNotFoundError(f"{path}: neither a file nor in a raw.tar.xz above it")


def exists(path: Path) -> bool:
    try:
        read_text(path)
    except FileNotFoundError:
        return False
    return True


def anchor_log_steps(text: str, completions_per_step: int) -> ratios.StepTimes:
    """TRL's per-step log lines (Python dict reprs with step_time and completions/mean_length)."""
    secs, toks = [], []
    for line in text.splitlines():
        if line.startswith("{") and "'step_time'" in line:
            row = ast.literal_eval(line)
            secs.append(float(row["step_time"]))
            toks.append(float(row["completions/mean_length"]) * completions_per_step)
    if not secs:
        raise ValueError("no TRL step lines (step_time) in the log")
    return ratios.StepTimes(tuple(secs), tuple(toks))


def anchor_log_for(json_path: Path) -> Path | None:
    beside = json_path.with_name("trl_anchor.log")
    for cand in (beside, json_path.with_name(json_path.name.replace("grpo_step_vs_trl", "trl_anchor")
                                             .replace(".json", ".log"))):
        if exists(cand):
            return cand
    return None


def recompute(json_path: Path) -> dict[str, Any] | None:
    """The symmetric ratios of one committed run; None when it printed no ratio (no TRL in that call)."""
    run = json.loads(json_path.read_text())
    log = anchor_log_for(json_path)
    if "trl" not in run or "ratio" not in run or log is None:
        return None
    bs = int(run["args"]["bs"])
    anchor = anchor_log_steps(read_text(log), bs)
    ours = ratios.ours_steps(run["ours"])
    sym = ratios.symmetric_ratios(ours, anchor)
    return {"json": str(json_path.relative_to(REPO)), "anchor_log": str(log.relative_to(REPO)),
            "device": run.get("machine", {}).get("gpu", run.get("machine", {}).get("device")),
            "printed": run["ratio"].get("completion_tok_per_s"), "anchor_steps_s": list(anchor.seconds),
            "steady": sym["steady"]["completion_tok_per_s"] if sym["steady"] else None,
            "end_to_end": sym["end_to_end"]["completion_tok_per_s"], "n_steps": sym["end_to_end"]["n_steps"],
            "ours_steady_tok_s": sym["steady"]["ours"]["completion_tok_per_s"] if sym["steady"] else None,
            "anchor_steady_tok_s": sym["steady"]["anchor"]["completion_tok_per_s"] if sym["steady"] else None}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--out", type=Path, default=RESULTS / "ratios_recomputed")
    a = p.parse_args(argv)
    rows = [r for f in sorted(a.results.rglob("grpo_step_vs_trl*.json")) if (r := recompute(f))]
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "ratios.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| run | printed | steady / steady | end to end (n steps) | ours steady tok/s | TRL steady tok/s | "
             "TRL steps (s) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["json"].removeprefix("benchmarks/results/gpu/")
        lines.append(f"| {name} | {r['printed']}x | {r['steady']}x | {r['end_to_end']}x ({r['n_steps']}) | "
                     f"{r['ours_steady_tok_s']} | {r['anchor_steady_tok_s']} | "
                     f"{' / '.join(f'{s:.1f}' for s in r['anchor_steps_s'])} |")
    (a.out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    main()

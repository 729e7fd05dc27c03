"""Speed ratios with one timing convention on both sides (benchmarks/gpu/ratios.py), and the recompute
of every committed GRPO-step-vs-TRL ratio from the files behind it (benchmarks/gpu/recompute_ratios.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
import ratios  # noqa: E402
import recompute_ratios  # noqa: E402


def test_steady_leaves_out_each_sides_first_step_and_end_to_end_uses_the_same_n():
    # ours: a 10 s compile step then 1 s steps; the anchor: a 40 s first step then 10 s steps
    ours = ratios.StepTimes((10.0, 1.0, 1.0, 1.0, 1.0), (100.0,) * 5)
    anchor = ratios.StepTimes((40.0, 10.0, 10.0, 10.0), (100.0,) * 4)
    r = ratios.symmetric_ratios(ours, anchor)
    assert r["steady"]["completion_tok_per_s"] == 10.0  # 100 tok/s against 10 tok/s
    assert r["steady"]["ours"]["steps"] == 4 and r["steady"]["anchor"]["steps"] == 3
    # end to end: both over their first 4 steps: 400 tok / 13 s against 400 tok / 70 s
    assert r["end_to_end"]["n_steps"] == 4
    assert r["end_to_end"]["completion_tok_per_s"] == pytest.approx((400 / 13) / (400 / 70), abs=0.05)
    # the old, asymmetric figure (our steady against the anchor's wall clock) would have said 100 / (400 / 70)
    assert r["steady"]["completion_tok_per_s"] < 100 / (400 / 70)


def test_bad_step_lists_are_refused_with_what_is_wrong():
    with pytest.raises(ValueError, match="2 times for 1 token counts"):
        ratios.StepTimes((1.0, 2.0), (3.0,))
    with pytest.raises(ValueError, match="not positive"):
        ratios.StepTimes((0.0,), (3.0,))
    with pytest.raises(ValueError, match="no steps_s"):
        ratios.anchor_steps({"completion_tok_per_s": 1.0})


def test_decode_bytes_and_roofline_share():
    need = ratios.decode_bytes_per_step(param_bytes=1000, rows=2, cache_slots=10, layers=3, kv_heads=2,
                                        head_dim=4, dtype_bytes=2)
    assert need["kv_cache"] == 2 * 10 * 3 * 2 * 2 * 4 * 2 and need["total"] == 1000 + need["kv_cache"]
    assert ratios.hbm_bandwidth("NVIDIA H200") == 4.8e12 and ratios.hbm_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert ratios.hbm_bandwidth("cpu") is None and ratios.roofline_share(10, 1.0, None) is None
    assert ratios.roofline_share(int(4.8e12), 2.0, 4.8e12) == 0.5


def test_the_committed_ratios_recomputed_steady_against_steady(tmp_path):
    rows = {Path(r["json"]).parent.name + "/" + Path(r["json"]).name: r
            for r in recompute_ratios.main(["--out", str(tmp_path)])}
    # the printed ratio put our steady figure against TRL's wall clock with its first step; symmetric, it is lower
    assert rows and all(r["steady"] < r["printed"] for r in rows.values())
    assert rows["grpo_default_profiled/grpo_step_vs_trl.json"]["steady"] == pytest.approx(8.1, abs=0.05)
    assert rows["fused_on/grpo_step_vs_trl.json"]["steady"] == pytest.approx(13.0, abs=0.05)
    assert (tmp_path / "table.md").read_text().count("\n") == len(rows) + 2

"""What an evaluation will cost, said before it starts: its trials times the recorded wall time of one.

The nightly (flows/eval_nightly.py) plays the full protocol for every target; on a CPU-only worker
that can be hours, so it logs this estimate first. Episodes play in lockstep batches, each about as
long as one episode, so the wall time is about ceil(trials / batch) x the mean recorded episode
time. The timing comes from the targets' own recorded trials under the same protocol (its
fingerprint), else from any recorded trials under it; timings were recorded on whichever machine ran
them.

    estimate = estimate_evaluation(fingerprint, "eval70_v1__...", trials=280, targets=["grpo-x"], batch=8)
    estimate.line(cpu_only=True)    # "CPU-only worker: 280 trials x 1 target ... about 2.1 h ..."
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from skillgate_core.base.paths import StateLayout
from warehouse.read import query

__all__ = ["CostEstimate", "estimate_evaluation"]


@dataclass(frozen=True)
class CostEstimate:
    """The cost of evaluating `targets` under one protocol."""

    protocol: str
    """The protocol, as shown (its id)."""
    trials: int
    """Trials per target (tasks x repeats)."""
    targets: int
    """Policies evaluated."""
    batch: int
    """Episodes played together (one lockstep batch)."""
    seconds_per_trial: float | None
    """Mean recorded wall time of one episode; None: nothing on record to time it by."""
    timed_by: str
    """Which recorded trials the timing comes from, in words ('' when none)."""

    @property
    def seconds(self) -> float | None:
        """Estimated wall time of the whole evaluation."""
        if self.seconds_per_trial is None:
            return None
        return math.ceil(self.trials / max(1, self.batch)) * self.seconds_per_trial * self.targets

    def line(self, cpu_only: bool) -> str:
        where = "CPU-only worker: " if cpu_only else ""
        what = (f"{where}{self.protocol}: {self.trials} trials x {self.targets} "
                f"target{'s' if self.targets != 1 else ''} in batches of {self.batch}")
        if self.seconds is None:
            return f"{what}; no recorded trial of this protocol to time it by (on a CPU, minutes per batch)"
        return (f"{what}: about {_duration(self.seconds)} at {self.seconds_per_trial:.1f} s per batch "
                f"(mean episode time of {self.timed_by})")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_evaluation(fingerprint: str, protocol: str, *, trials: int, targets: Sequence[str], batch: int,
                        state: StateLayout | None = None) -> CostEstimate:
    """The estimate for `targets` (experiment ids) under the protocol of `fingerprint` (shown as
    `protocol`); see the module docstring."""
    sql = ("select avg(seconds), count(*) from v_eval_trial where fingerprint = ? and seconds is not null"
           " and status <> 'aborted'")
    timing, by = None, ""
    if targets:
        placeholders = ", ".join("?" * len(targets))
        [(mean, n)] = query(sql + f" and experiment_id in ({placeholders})", [fingerprint, *targets], state).rows
        if n:
            timing, by = float(mean), f"{n} recorded trial{'s' if n != 1 else ''} of these targets"
    if timing is None:
        [(mean, n)] = query(sql, [fingerprint], state).rows
        if n:
            timing, by = float(mean), f"{n} recorded trial{'s' if n != 1 else ''} of other policies"
    return CostEstimate(protocol, trials, len(targets), batch, timing, by)

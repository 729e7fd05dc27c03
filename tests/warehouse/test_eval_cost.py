"""The cost of an evaluation, said before it starts: trials x the recorded time of one, per batch."""

from __future__ import annotations

from wh_scenario import lineage_scenario

from skillgate_core.base.paths import StateLayout
from warehouse import query, record
from warehouse.eval_cost import estimate_evaluation
from warehouse.events import EvalTrial, EvalTrials


def test_the_estimate_times_the_protocol_by_the_targets_recorded_trials(state: StateLayout):
    sc = lineage_scenario(state)
    [(fingerprint, experiment_id)] = query("select distinct fingerprint, experiment_id from v_eval_trial",
                                           state=state).rows
    protocol_id = "eval70_v1__mixed__r4__0123456789"
    nothing = estimate_evaluation(fingerprint, protocol_id, trials=280, targets=[experiment_id], batch=8, state=state)
    assert nothing.seconds is None and "no recorded trial of this protocol" in nothing.line(cpu_only=True)

    timed = tuple(EvalTrial(row_id=f"timed-{i}", trial_index=100 + i, task_id="t9", benchmark="procedural", repeat=i,
                            outcome="fail", status="completed", seconds=s) for i, s in enumerate((10.0, 20.0)))
    record(EvalTrials(eval_id=sc.eval_id, trials=timed), state=state)
    estimate = estimate_evaluation(fingerprint, protocol_id, trials=280, targets=[experiment_id], batch=8, state=state)
    assert estimate.seconds_per_trial == 15.0 and estimate.seconds == 35 * 15.0  # ceil(280 / 8) batches
    line = estimate.line(cpu_only=True)
    assert line.startswith(f"CPU-only worker: {protocol_id}: 280 trials x 1 target in batches of 8: about 9 min")
    assert "2 recorded trials of these targets" in line
    other = estimate_evaluation(fingerprint, protocol_id, trials=280, targets=["another-experiment"], batch=8, state=state)
    assert other.seconds == estimate.seconds and "of other policies" in other.line(cpu_only=False)

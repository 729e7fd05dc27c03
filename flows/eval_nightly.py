"""The `eval70-nightly` flow: evaluate the newest export of each named experiment (or one given
export) under eval70_v1, compare with the previous nightly of the same protocol fingerprint, flag a
drop outside the bootstrap interval, and end Failed when anything regressed.

    prefect deployment run eval70-nightly/eval70-nightly -p experiments='["grpo-skillgate-001"]'
    eval70_nightly(export="grpo-skillgate-001/step-200", bench="/data/bench", demo_repeats=1)

Each evaluation is tagged nightly-YYYY-MM-DD (the flow's `date`, default today in UTC), so a retry
of the same night resumes that night's evaluation and the next night starts a fresh one. The result
is a table artifact `eval70-nightly` (one row per experiment: current and previous trial success,
delta, bootstrap interval, regressed), one warehouse eval_regression row per experiment, and the
run's state: Failed with the regressions named when any drop lies outside its interval.
`demo_repeats` is the explicit demo override (fewer repeats: another protocol fingerprint, so it is
compared only with earlier nightlies that used the same override).
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.stage_flows import STAGE_FLOWS
from skillgate_core.base.config import config_to_dict
from skillgate_core.base.paths import state_layout
from skillgate_core.base.run_paths import check_run_path
from skillgate_core.evaluation.nightly import nightly_tag, nightly_targets
from skillgate_core.evaluation.stage import Eval70Config
from tasks.eval_nightly import compare_task, targets_task
from tasks.stage import TRIGGER_TAG_PREFIX
from warehouse import check_trigger
from warehouse.eval_cost import estimate_evaluation
from warehouse.outputs import WarehouseInputFinder

__all__ = ["RegressionDetected", "eval70_nightly", "nightly_cost_line", "nightly_rows"]


class RegressionDetected(RuntimeError):
    """A nightly evaluation dropped outside its bootstrap interval (or could not be evaluated)."""


def _newest_bench() -> Path:
    """The newest completed bench on record (the nightly evaluates on what the pipeline built)."""
    found = WarehouseInputFinder(state_layout()).newest("bench")
    if found is None:
        raise FileNotFoundError("the nightly needs a bench: none is on record (run `skillgate run demo --execute` "
                                "or a bench-build), or pass the `bench` parameter")
    return Path(found.path)


def _cost(protocol: str, bench: Path, demo_repeats: int, batch: int, targets: list[dict[str, Any]]) -> tuple[str, bool]:
    """(the estimate in words, whether this machine is CPU-only) for the evaluations of `targets`
    (warehouse/eval_cost.py); the full protocol can take hours on a CPU-only worker."""
    import torch

    from skillgate_core.evaluation.specs import build_protocol, load_spec

    resolved = build_protocol(load_spec(protocol), bench, demo_repeats=demo_repeats)
    estimate = estimate_evaluation(resolved.protocol.fingerprint(), resolved.protocol.protocol_id(),
                                   trials=resolved.trial_count(),
                                   targets=[t["experiment_id"] for t in targets], batch=batch)
    cpu_only = not torch.cuda.is_available()
    return estimate.line(cpu_only), cpu_only


def _say_the_cost(logger: Any, protocol: str, bench: Path, demo_repeats: int, batch: int,
                  targets: list[dict[str, Any]]) -> None:
    """Log, before any trial, what the evaluations will cost; a warning on a CPU-only worker."""
    if not targets:
        return
    try:
        line, cpu_only = _cost(protocol, bench, demo_repeats, batch, targets)
    except Exception as exc:  # the estimate informs; the evaluations report their own errors
        logger.warning("cost: no estimate (%s: %s)", type(exc).__name__, exc)
        return
    (logger.warning if cpu_only else logger.info)("cost: %s", line)


def nightly_cost_line() -> str:
    """What the scheduled nightly (its default parameters) would cost tonight, before it fires
    (flows/nightly_schedule.py says it when the schedule is switched on)."""
    defaults = {name: p.default for name, p in inspect.signature(eval70_nightly.fn).parameters.items()}
    targets = [{"experiment_id": t.experiment_id} for t in nightly_targets(state_layout().experiments)]
    line, _ = _cost(defaults["protocol"], _newest_bench(), defaults["demo_repeats"], defaults["batch_episodes"],
                    targets)
    return f"nightly cost: {line}"


def _number(value: float | None, signed: bool = False) -> str:
    return "" if value is None else f"{value:+.3f}" if signed else f"{value:.3f}"


def nightly_rows(results: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The `eval70-nightly` table: one row per target, the verdict and the numbers first.

    What is read every morning, in the Prefect UI's table at a laptop's width: the verdict and trial
    success come before the long ids (export, previous evaluation), which would push them off-screen;
    tonight's trial success is shown even on a first nightly; a cell without a value says why in
    words (a lone "-" renders as a list bullet in the UI's markdown)."""
    rows = []
    for r in results:
        c = r.get("check") or {}
        verdict = ("ERROR" if r["error"] else "REGRESSION" if r["regressed"] else "ok" if c else "first nightly")
        rows.append({"experiment": r["experiment_id"], "verdict": verdict,
                     "trial_success": _number(r.get("trial_success")),
                     "previous": _number(c.get("previous")) if c else "none",
                     "delta": _number(c.get("delta"), signed=True),
                     "interval": f"{c['ci_low']:+.3f} to {c['ci_high']:+.3f}" if c else "",
                     "export": r["export_id"], "previous_eval": r.get("previous_eval_id") or "none"})
    return rows


def _run_name() -> str:
    from prefect.runtime import flow_run

    return f"eval70-nightly {flow_run.parameters.get('date') or datetime.now(UTC).strftime('%Y-%m-%d')}"


@flow(name="eval70-nightly", log_prints=True, flow_run_name=_run_name)
def eval70_nightly(
    experiments: list[str] | None = None,
    export: str = "",
    bench: str = "",
    protocol: str = "eval70_v1",
    demo_repeats: int = 0,
    date: str = "",
    batch_episodes: int = 8,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    trigger: str = "schedule",
) -> dict[str, Any]:
    """Evaluate, compare, flag (module docstring). Returns {"date", "results": [...]}; raises
    RegressionDetected (run state Failed) after recording everything when anything regressed or failed."""
    check_trigger(trigger)
    if bench:  # a deployment parameter: a folder a run may read only (base.run_paths)
        check_run_path(bench, "bench")
    logger = get_run_logger()
    date = date or datetime.now(UTC).strftime("%Y-%m-%d")
    bench_dir = Path(bench) if bench else _newest_bench()
    config = Eval70Config(protocol=protocol, demo_repeats=demo_repeats, tag=nightly_tag(date),
                          batch_episodes=batch_episodes)
    results: list[dict[str, Any]] = []
    targets = targets_task(list(experiments or []), export)
    _say_the_cost(logger, protocol, bench_dir, demo_repeats, batch_episodes, targets)
    for target in targets:
        try:
            stage_flow = STAGE_FLOWS["eval70"].with_options(flow_run_name=f"eval70-nightly/{target['experiment_id']}")
            with tags(TRIGGER_TAG_PREFIX + trigger, "recipe:eval70-nightly"):
                record = stage_flow(config_to_dict(config),
                                               {"policy_export": target["path"], "bench": str(bench_dir)})
            comparison = compare_task(target["experiment_id"], record["metrics"]["eval_id"], n_boot, seed, alpha)
            results.append({**comparison, "error": None})
        except Exception as exc:  # one broken target must not hide the others' results
            logger.error("nightly of %s/%s failed: %s", target["experiment_id"], target["export_id"], exc)
            results.append({"experiment_id": target["experiment_id"], "export_id": target["export_id"],
                            "eval_id": None, "regressed": False, "check": None, "previous_eval_id": None,
                            "trial_success": None,
                            "error": f"{type(exc).__name__}: {exc}"})
    rows = nightly_rows(results)
    create_table_artifact(key="eval70-nightly", table=rows,
                          description=f"eval70 nightly {date}: trial success vs the previous nightly of the same "
                                      f"protocol fingerprint (paired task-cluster bootstrap, {1 - alpha:.0%} interval)")
    bad = [r for r in results if r["regressed"] or r["error"]]
    if bad:
        lines = [f"# eval70 nightly {date}: {len(bad)} problem(s)", ""]
        for r in bad:
            c = r.get("check") or {}
            lines.append(f"- **{r['experiment_id']}** ({r['export_id']}): " + (
                f"error: {r['error']}" if r["error"] else
                f"trial success {c['previous']:.3f} -> {c['current']:.3f} (delta {c['delta']:+.3f}, interval "
                f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]) vs {r['previous_eval_id']}"))
        create_markdown_artifact(key="eval70-nightly-regressions", markdown="\n".join(lines))
        raise RegressionDetected("; ".join(
            f"{r['experiment_id']}: " + (r["error"] or f"trial success dropped by {-r['check']['delta']:.3f}")
            for r in bad))
    return {"date": date, "results": results}

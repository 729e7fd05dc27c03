"""One Prefect sub-flow per pipeline stage, so each stage shows as its own flow run in the UI."""

from __future__ import annotations

from typing import Any

from prefect import flow

from skillgate_core.pipeline.stages import STAGES
from tasks.stage import run_stage_task

__all__ = ["STAGE_FLOWS"]


def _make_stage_flow(stage: str):
    # library prints stay on stdout, not in run logs: log_prints=False (None inherits the entry flow's
    # True; see tasks/stage.py for what that leaks)
    @flow(name=stage, flow_run_name=f"{stage}", log_prints=False)
    def stage_flow(config: dict[str, Any], inputs: dict[str, str]) -> dict[str, Any]:
        return run_stage_task(stage, config, inputs)

    stage_flow.__doc__ = f"Sub-flow of stage '{stage}'."
    return stage_flow


STAGE_FLOWS = {spec.name: _make_stage_flow(spec.name) for spec in STAGES if spec.built}

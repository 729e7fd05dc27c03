"""The newest completed output of a role: how a run finds the inputs it does not build itself.

    finder = WarehouseInputFinder(state_layout())
    finder.newest("sft_model")   # FoundInput(path=..., description="sft run sft-20261130T170200-3f2a9c of 2026-11-30 17:02 UTC")
    finder.lookup("sft_model", "sft-20261130T1702")   # by run id, export id, digest or unique prefix

Only outputs of runs that completed, and whose content is still where it was written, count: a
deleted folder is skipped for the next newest one.
"""

from __future__ import annotations

from pathlib import Path

from skillgate_core.base.paths import StateLayout, state_layout
from skillgate_core.pipeline.recipe_plan import FoundInput
from warehouse.read import query, read_connection
from warehouse.refs import match_ref
from warehouse.runs import run_outputs

__all__ = ["WarehouseInputFinder", "newest_outputs"]

_NEWEST = """
select dv.uri, dv.sha256, r.run_id, r.stage, re.finished_at
from dataset_version dv
join run r on r.run_id = dv.produced_by_run
join run_end re on re.run_id = r.run_id
where dv.kind = ? and re.status = 'completed'
order by re.finished_at desc, r.run_id desc
limit 50
"""


def newest_outputs(role: str, state: StateLayout | None = None) -> list[dict]:
    """Completed outputs of `role`, newest first (uri, sha256, run_id, stage, finished_at)."""
    return query(_NEWEST, [role], state or state_layout()).dicts()


class WarehouseInputFinder:
    """recipe_plan.InputFinder over the warehouse of one state dir."""

    def __init__(self, state: StateLayout | None = None) -> None:
        self.state = state or state_layout()

    def newest(self, role: str) -> FoundInput | None:
        if not self.state.warehouse_file.exists():
            return None
        for row in newest_outputs(role, self.state):
            if Path(row["uri"]).exists():
                when = row["finished_at"].strftime("%Y-%m-%d %H:%M UTC")
                return FoundInput(path=row["uri"], description=f"{row['stage']} run {row['run_id']} of {when}")
        return None

    def lookup(self, role: str, reference: str) -> FoundInput:
        """What `reference` (warehouse.refs: any id or digest, or a unique prefix) names for `role`:
        a dataset or export by its content, or the `role` output of a run. LookupError otherwise."""
        with read_connection(self.state) as con:
            match = match_ref(con, reference, self.state)
            if match.kind == "run":
                outputs = {o["role"]: o["uri"] for o in run_outputs(con, match.id)}
                if role not in outputs:
                    raise LookupError(f"run {match.id} has no {role} output (it has: {', '.join(outputs) or 'none'})")
                return FoundInput(path=outputs[role], description=f"{role} of run {match.id}")
        if match.kind in ("dataset", "export", "evaluation") and match.uri:
            return FoundInput(path=match.uri, description=match.describe())
        raise LookupError(f"it names {match.describe()}, which is not a {role}")

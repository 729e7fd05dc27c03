"""The nightly's schedule, said out loud: off unless asked for, and what it costs before it fires.

prefect.yaml declares the `eval70-nightly` cron schedule inactive: a server started to look at the UI
must not start hours of CPU work at 02:00 on its own. infra/prefect_server.sh calls this module after
`prefect deploy --all` (which rewrites the schedule as prefect.yaml declares it), so the schedule's
state follows SKILLGATE_NIGHTLY at every start, and prints the result either way:

    python -m flows.nightly_schedule show     # "nightly: eval70-nightly/eval70-nightly 0 2 * * * UTC: OFF ..."
    python -m flows.nightly_schedule on       # activate; says what a night will cost on this machine
    python -m flows.nightly_schedule off

Exit status 0; 2 when the deployment is not on the server (deploy first).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

__all__ = ["NIGHTLY_DEPLOYMENT", "nightly_schedule_lines", "set_nightly_schedule"]

NIGHTLY_DEPLOYMENT = "eval70-nightly/eval70-nightly"

_ENABLE_HINT = "SKILLGATE_NIGHTLY=1 bash infra/prefect_server.sh"


def _describe(schedule: Any) -> str:
    s = schedule.schedule
    if getattr(s, "cron", None):
        return f"cron '{s.cron}' {s.timezone or 'UTC'}"
    return str(s)


async def _apply(active: bool | None) -> list[str]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        deployment = await client.read_deployment_by_name(NIGHTLY_DEPLOYMENT)
        if active is not None:
            for sched in deployment.schedules:
                await client.update_deployment_schedule(deployment.id, sched.id, active=active)
            deployment = await client.read_deployment_by_name(NIGHTLY_DEPLOYMENT)
    if not deployment.schedules:
        return [f"nightly: {NIGHTLY_DEPLOYMENT} has no schedule (runs only when started by hand)"]
    lines = []
    for sched in deployment.schedules:
        if sched.active:
            lines.append(f"nightly: {NIGHTLY_DEPLOYMENT} {_describe(sched)}: ON (the full protocol on every "
                         "experiment with an export; turn off: bash infra/prefect_server.sh with "
                         "SKILLGATE_NIGHTLY unset, or pause it in the UI)")
        else:
            lines.append(f"nightly: {NIGHTLY_DEPLOYMENT} {_describe(sched)}: OFF (opt in: {_ENABLE_HINT})")
    return lines


def _cost_line() -> str:
    """What one night would cost now: the nightly's own estimate, for its default targets (best effort)."""
    try:
        from flows.eval_nightly import nightly_cost_line

        return nightly_cost_line()
    except Exception as exc:  # the estimate informs; the switch itself already happened
        return f"nightly cost: no estimate ({type(exc).__name__}: {exc})"


def nightly_schedule_lines(active: bool | None = None) -> list[str]:
    """Set the nightly's schedule(s) active/inactive (None: leave them), and describe them."""
    return asyncio.run(_apply(active))


def set_nightly_schedule(active: bool) -> list[str]:
    """Switch the schedule; when switching on, add what one night will cost."""
    lines = nightly_schedule_lines(active)
    return [*lines, _cost_line()] if active else lines


def main(argv: list[str]) -> int:
    from prefect.exceptions import ObjectNotFound

    what = argv[0] if argv else "show"
    if what not in ("show", "on", "off"):
        print("usage: python -m flows.nightly_schedule [show|on|off]", file=sys.stderr)
        return 2
    try:
        lines = nightly_schedule_lines() if what == "show" else set_nightly_schedule(what == "on")
    except ObjectNotFound:
        print(f"nightly: deployment {NIGHTLY_DEPLOYMENT} is not on the server (prefect deploy --all first)",
              file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

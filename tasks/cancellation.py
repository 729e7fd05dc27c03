"""A cancel from Prefect (UI, API, `prefect flow-run cancel`), told apart from a crash.

How Prefect 3 cancels a flow run that a worker started: the server moves the run to Cancelling; the
worker's runner first sends the intent `cancel` over the run's control channel (the flow-run process
records it: `prefect._internal.control_listener.get_intent()`), then SIGTERM. Prefect's SIGTERM handler
raises `TerminationSignal` in the main thread, which unwinds the stage (its message is empty: a
stage run recorded it as failed, "TerminationSignal: "), and the engine then proposes Cancelled
instead of Crashed because the intent says cancel. A SIGTERM without that intent (the worker
stopped, `prefect_server.sh stop`) stays what it was.

The intent is Prefect's internal API; when it is missing (an older worker, a cancel that landed
before the channel connected) the run's own state on the server decides: Cancelling or Cancelled is
a cancel. `prefect_cancellation` is the reader skillgate_core.base.interrupts asks.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CANCELLED_FROM_PREFECT", "prefect_cancellation"]

CANCELLED_FROM_PREFECT = "cancelled from Prefect (the flow run was cancelled in the UI or through the API)"


def _intent() -> Any:
    try:
        from prefect._internal.control_listener import get_intent
    except ImportError:  # a Prefect without the control channel
        return None
    return get_intent()


def _server_says_cancelled() -> bool:
    from prefect import runtime
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType

    if not runtime.flow_run.id:
        return False
    try:
        state = get_client(sync_client=True).read_flow_run(runtime.flow_run.id).state
    except Exception:  # no server to ask: not known to be a cancel
        return False
    return state is not None and state.type in (StateType.CANCELLING, StateType.CANCELLED)


def prefect_cancellation(exc: BaseException) -> str | None:
    """CANCELLED_FROM_PREFECT when `exc` is the TerminationSignal of a Prefect cancel, else None."""
    from prefect.exceptions import TerminationSignal

    if not isinstance(exc, TerminationSignal):
        return None
    if _intent() == "cancel" or _server_says_cancelled():
        return CANCELLED_FROM_PREFECT
    return None

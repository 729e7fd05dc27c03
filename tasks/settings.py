"""Prefect settings for the embedded default, applied before Prefect is imported.

Nothing is forced: a value already in the environment (a real server's PREFECT_API_URL, say) wins.
Embedded default: PREFECT_HOME inside the state dir (so Prefect writes nothing in ~), no telemetry,
and an ephemeral-server start-up timeout that survives a cold 2-core machine (the default of 20 s
does not, measured: ~25-60 s for the first start). Every entry point also records itself as the
owner of the temporary server it may start and stops those of killed runs (tasks/prefect_servers.py).
"""

from __future__ import annotations

import os

from skillgate_core.base.library_noise import quiet_library_output
from skillgate_core.base.paths import apply_cache_env, state_layout
from tasks.prefect_servers import mark_owner, reap_orphaned_servers

__all__ = ["configure_prefect_env"]

EPHEMERAL_STARTUP_TIMEOUT_S = 180


def configure_prefect_env() -> dict[str, str]:
    """Set Prefect's environment defaults for this state dir; returns what was set."""
    layout = state_layout()
    apply_cache_env(layout)
    quiet_library_output()
    defaults = {
        "PREFECT_HOME": str(layout.prefect_home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(EPHEMERAL_STARTUP_TIMEOUT_S),
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        "PREFECT_UI_ENABLED": os.environ.get("PREFECT_UI_ENABLED", "false"),
    }
    applied = {}
    for key, value in defaults.items():
        if key not in os.environ:
            os.environ[key] = value
            applied[key] = value
    layout.prefect_home.mkdir(parents=True, exist_ok=True)
    # Before any server of ours starts: it carries our identity, and killed runs' servers go now.
    mark_owner()
    reap_orphaned_servers()
    return applied

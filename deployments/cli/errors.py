"""Errors that are the user's to fix: one paragraph naming the file and the fix, never a traceback.

`main()` asks `user_error_message(exc)` about anything a command raised; None means a bug, which
keeps its traceback (that is what a bug report needs).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from skillgate_core.base.config import ConfigError
from skillgate_core.base.paths import ENV_HOME, state_layout
from skillgate_core.pipeline.stages import UnknownStageError

__all__ = ["user_error_message"]

_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _not_writable(exc: OSError) -> str:
    where = Path(exc.filename) if exc.filename else None
    home = state_layout().home
    reason = exc.strerror or os.strerror(exc.errno or 0)
    if where is None or where == home or home in where.parents:
        return (
            f"{where or home}: {reason}. SkillGate writes everything it records or builds under {ENV_HOME} "
            f"({home}), so that folder must be writable: set {ENV_HOME} to a writable folder, or make {home} "
            f"writable. Reading an existing state dir (skillgate sql, warehouse status, warehouse verify) "
            f"works without writing."
        )
    return f"{where}: {reason}. Choose a location you may write to, or fix its permissions."


def user_error_message(exc: BaseException) -> str | None:
    """The one-paragraph message for an error the user can fix, or None for anything else."""
    from skillgate_core.evaluation.protocol import ProtocolConflictError, ProtocolMismatchError
    from skillgate_core.ownership.errors import OwnershipError
    from skillgate_core.policy.openai_chat import EndpointError
    from warehouse.damage import WarehouseDamaged  # deferred: the warehouse is not every command's business
    from warehouse.refs import RefError

    if isinstance(exc, (ConfigError, UnknownStageError, FileNotFoundError, WarehouseDamaged, ProtocolConflictError,
                        ProtocolMismatchError, EndpointError, OwnershipError, RefError)):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno in _NOT_WRITABLE:
        return _not_writable(exc)
    return None

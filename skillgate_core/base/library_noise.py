"""Library chatter that says nothing to a SkillGate user, dropped where it is logged.

DeepSpeed announces its accelerator on import ("Setting ds_accelerator to cuda (auto detect)", or on a
CPU machine a WARNING "Setting accelerator to CPU. If you have GPU ...") on stdout, with a handler of
its own; transformers and accelerate import DeepSpeed whenever it is installed, so the line lands in
the middle of every sft/bc/dpo/grpo run, and of stdout a caller may be parsing. The line is a fact about
the machine, which `skillgate doctor` reports properly.

`quiet_library_output()` puts a filter on those loggers; it is idempotent and cheap (nothing is
imported), and every process entry point calls it before a library can log: the CLI, the Prefect
settings of flows, the Ray Train worker.

Why a filter on the logger rather than a level: DeepSpeed's logger factory resets the level (and adds
its stdout handler) when it is imported, but keeps the filters of the logger object it gets back.
"""

from __future__ import annotations

import logging

__all__ = ["DROPPED_PREFIXES", "quiet_library_output"]

DROPPED_PREFIXES: dict[str, tuple[str, ...]] = {
    "DeepSpeed": ("Setting ds_accelerator to ", "Setting accelerator to CPU"),
}
"""Logger name -> message prefixes that are dropped (everything else those loggers say still shows)."""


def _drop_known_chatter(record: logging.LogRecord) -> bool:
    prefixes = DROPPED_PREFIXES.get(record.name, ())
    return not str(record.msg).startswith(prefixes)


def quiet_library_output() -> None:
    """Install the filters of DROPPED_PREFIXES (again calling it changes nothing)."""
    for name in DROPPED_PREFIXES:
        logger = logging.getLogger(name)
        if _drop_known_chatter not in logger.filters:
            logger.addFilter(_drop_known_chatter)

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

Prefect's embedded server says "Starting temporary server on URL" and then a second line sending the
reader to Prefect's docs, and at the end "Stopping temporary server on URL": the first line stays (a
pause of seconds follows it), its advice and the closing line go (SHORTENED, DROPPED_PREFIXES). Ray's
usage-stats notice (a paragraph on every local cluster start, telemetry nobody asked for) is turned
off with its own switch, RAY_USAGE_STATS_ENABLED=0, unless the environment already sets it.
"""

from __future__ import annotations

import logging
import os

__all__ = ["DROPPED_PREFIXES", "QUIET_ENV", "SHORTENED", "quiet_library_output"]

DROPPED_PREFIXES: dict[str, tuple[str, ...]] = {
    "DeepSpeed": ("Setting ds_accelerator to ", "Setting accelerator to CPU"),
    "prefect": ("Stopping temporary server on ",),
}
"""Logger name -> message prefixes that are dropped (everything else those loggers say still shows)."""
SHORTENED: dict[str, tuple[str, ...]] = {
    "prefect": ("Starting temporary server on ",),
}
"""Logger name -> message prefixes whose message keeps only its first line."""
QUIET_ENV: dict[str, str] = {"RAY_USAGE_STATS_ENABLED": "0"}
"""Libraries' own switches for notices, set when the environment does not set them."""


def _drop_known_chatter(record: logging.LogRecord) -> bool:
    msg = str(record.msg)
    if msg.startswith(SHORTENED.get(record.name, ())):
        record.msg, record.args = msg.split("\n", 1)[0], ()
    return not msg.startswith(DROPPED_PREFIXES.get(record.name, ()))


def quiet_library_output() -> None:
    """Install the filters of DROPPED_PREFIXES and SHORTENED, and QUIET_ENV's defaults (again calling
    it changes nothing)."""
    for name in {*DROPPED_PREFIXES, *SHORTENED}:
        logger = logging.getLogger(name)
        if _drop_known_chatter not in logger.filters:
            logger.addFilter(_drop_known_chatter)
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)

"""Training progress on rank 0: one tick per optimizer step, shown the way its output is read.

The driver picks the style (`progress_style()`: it knows whether a person watches a terminal; a
Ray worker does not):

- "bar" under Ray Train: `ray.experimental.tqdm_ray` (the driver draws the bar and redraws it
  around the workers' log lines, which stay readable);
- "bar" in this process: a tqdm bar on stderr;
- "lines" (a Prefect worker's log, a file, CI): one plain line per step, which Ray prefixes with
  the worker like any other line;
- "off": the workers show nothing, because the driver follows the run's metrics.jsonl itself
  (`follow_metrics`, what the grpo stage does under Ray: the workers' own output stays in Ray's
  session logs unless SKILLGATE_RAY_WORKER_LOGS=1, so a run reads as one bar, not pages of Ray).

Every other rank gets a progress that shows nothing.

    progress = step_progress(total=cfg.steps, initial=start_step, desc="grpo exp-1", style=job.progress,
                             under_ray=ctx.under_ray, enabled=rank == 0)
    progress.step(row)     # after each optimizer step (row: that step's metrics)
    progress.close()
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

__all__ = ["ProgressStyle", "StepProgress", "follow_metrics", "progress_style", "step_progress"]

ProgressStyle = Literal["bar", "lines", "off"]


class ProgressBar(Protocol):
    """What StepProgress uses of a bar: tqdm's and ray's tqdm_ray have it (tqdm also set_postfix_str)."""

    def update(self, n: int = 1) -> object: ...

    def set_description(self, desc: str) -> object: ...

    def close(self) -> object: ...


def progress_style(stream: TextIO | None = None) -> ProgressStyle:
    """'bar' when `stream` (stderr) is a terminal, else 'lines'."""
    stream = stream or sys.stderr
    return "bar" if stream.isatty() else "lines"


def _summary(row: Mapping[str, Any]) -> str:
    parts = []
    for key, label, fmt in (("reward", "reward", "{:.3f}"), ("success_rate", "success", "{:.2f}"),
                            ("clean_oracle_rate", "clean-oracle", "{:.2f}"), ("kl", "kl", "{:.2e}"),
                            ("time_step_s", "s/step", "{:.1f}")):
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{label} {fmt.format(value)}")
    # where the step's time went and how many episodes it played (refilled rejected groups included):
    # what a log alone must show when a run is cut off before its metrics file comes back
    split = [(label, row.get(key)) for key, label in (("time_generate_s", "generate"), ("time_env_s", "env"),
                                                      ("time_train_s", "train"))]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in split):
        from skillgate_core.agent.episode import (
            ENV_PHASES,  # here: the trainer has it loaded, a log reader need not
        )

        texts = [f"{label} {v:.1f}" for label, v in split]
        env = [(phase, row.get(f"time_env_{phase}_s")) for phase in ENV_PHASES]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in env):
            texts[1] += " [" + ", ".join(f"{phase} {v:.1f}" for phase, v in env) + "]"
        parts.append("(" + ", ".join(texts) + ")")
    played = row.get("episodes_played")
    if isinstance(played, int) and not isinstance(played, bool):
        parts.append(f"played {played}")
    # groups accepted of drawn, and whether the step updated the policy: a run whose arms starve shows it here
    accepted, drawn = row.get("groups_accepted"), row.get("groups_drawn")
    if isinstance(accepted, int) and isinstance(drawn, int) and not isinstance(drawn, bool):
        parts.append(f"accepted {accepted}/{drawn}" + ("" if row.get("optimizer_step_taken", True) else " (no update)"))
    return "  ".join(parts)


class StepProgress:
    """Ticks once per optimizer step; `bar` is a tqdm-like object, or None for plain lines (or nothing)."""

    def __init__(self, *, total: int, initial: int, desc: str, bar: ProgressBar | None = None,
                 stream: TextIO | None = None) -> None:
        self.total, self.done, self.desc = total, initial, desc
        self._bar, self._stream = bar, stream

    def step(self, row: Mapping[str, Any]) -> None:
        self.done += 1
        summary = _summary(row)
        if self._bar is not None:
            self._bar.update(1)
            if hasattr(self._bar, "set_postfix_str"):
                self._bar.set_postfix_str(summary, refresh=True)
            else:  # tqdm_ray shows only the description
                self._bar.set_description(f"{self.desc}  {summary}")
        elif self._stream is not None:
            print(f"{self.desc}: step {self.done}/{self.total}  {summary}", file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def step_progress(*, total: int, initial: int, desc: str, style: ProgressStyle, under_ray: bool,
                  enabled: bool = True, stream: TextIO | None = None) -> StepProgress:
    """The progress for this rank and this output (module docstring)."""
    if not enabled or style == "off":
        return StepProgress(total=total, initial=initial, desc=desc)
    stream = stream or sys.stderr
    if style == "bar" and under_ray:
        from ray.experimental.tqdm_ray import tqdm as ray_tqdm

        bar: ProgressBar = ray_tqdm(total=total, desc=desc, unit="step")
        if initial:
            bar.update(initial)
        return StepProgress(total=total, initial=initial, desc=desc, bar=bar)
    if style == "bar":
        from tqdm import tqdm

        bar = tqdm(total=total, initial=initial, desc=desc, unit="step", file=stream, dynamic_ncols=True)
        return StepProgress(total=total, initial=initial, desc=desc, bar=bar)
    return StepProgress(total=total, initial=initial, desc=desc, stream=stream)


@contextmanager
def follow_metrics(path: Path, *, total: int, initial: int, desc: str, style: ProgressStyle,
                   poll_s: float = 1.0, stream: TextIO | None = None, waiting: str = "",
                   waiting_every_s: float = 30.0) -> Iterator[StepProgress]:
    """While the body runs, tick a progress (in this process) once per step row appended to `path`.

    Rows are JSON lines with a 0-based "step"; steps below `initial` (done before a resume) are
    skipped, and a step is counted once however many rows it has. The file may
    appear late (the workers create it); a partial last line is read on the next poll.
    `waiting`: until the first step, one line `DESC: WAITING (N s)` every `waiting_every_s` on
    `stream` (stderr), so minutes of start-up (Ray, DeepSpeed, the first rollouts) are not silence.
    """
    progress = step_progress(total=total, initial=initial, desc=desc, style=style, under_ray=False, stream=stream)
    stop = threading.Event()
    seen: set[int] = set()
    started = time.monotonic()
    said = started

    def poll() -> None:
        nonlocal said
        offset, tail = 0, ""
        while True:
            stopping = stop.is_set()
            if waiting and not seen and time.monotonic() - said >= waiting_every_s:
                said = time.monotonic()
                print(f"{desc}: {waiting} ({said - started:.0f} s)", file=stream or sys.stderr, flush=True)
            if path.is_file():
                with path.open() as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                    offset = fh.tell()
                lines = (tail + chunk).split("\n")
                tail = lines.pop()
                for line in lines:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    step = row.get("step")
                    if isinstance(step, int) and step not in seen and step >= initial:  # steps count from 0
                        seen.add(step)
                        progress.step(row)
            if stopping:  # one last read after the run ended, then done
                return
            stop.wait(poll_s)

    thread = threading.Thread(target=poll, name="follow-metrics", daemon=True)
    thread.start()
    try:
        yield progress
    finally:
        stop.set()
        thread.join(timeout=10)
        progress.close()

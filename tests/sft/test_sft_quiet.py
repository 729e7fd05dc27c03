"""Library noise during training stages: no bytecode disassembly, no DeepSpeed accelerator line.

The disassembly came from the sft stage run inside the entry flow (log_prints=True): datasets
fingerprints each TRL map function with dill, whose global detection disassembles the function into a
buffer it swaps in for sys.stdout, and Prefect's print patch logged those print(file=None) calls
anyway, a page per map. The stage sub-flow and task now say log_prints=False (tasks/stage.py).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillgate_core.agent.collect import CollectConfig, collect_trajectories

REPO = Path(__file__).resolve().parents[2]
ACCELERATOR_LINE = "Setting accelerator to CPU"
DISASSEMBLY = ("Disassembly of <code object", "LOAD_GLOBAL", "RETURN_VALUE")


def _import_deepspeed(prelude: str) -> str:
    """stdout + stderr of a fresh interpreter that runs `prelude`, then imports DeepSpeed the way
    saving any HF model does (accelerate's extract_model_from_parallel)."""
    code = (f"{prelude}\nimport torch\nfrom accelerate.utils import extract_model_from_parallel\n"
            "extract_model_from_parallel(torch.nn.Linear(1, 1))\nprint('done')\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)}  # no GPU: DeepSpeed warns
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def test_the_deepspeed_accelerator_line_is_dropped_in_every_skillgate_process():
    assert ACCELERATOR_LINE in _import_deepspeed("")  # the noise exists without SkillGate's entry points
    out = _import_deepspeed("import deployments.cli")  # the CLI
    assert ACCELERATOR_LINE not in out and "ds_accelerator" not in out and "done" in out, out
    # flows and tasks (a Prefect worker) set the same filter up: DeepSpeed's logger drops the line
    from tasks.settings import configure_prefect_env

    configure_prefect_env()
    for line in (ACCELERATOR_LINE + ". If you have GPU ...", "Setting ds_accelerator to cuda (auto detect)"):
        record = logging.LogRecord("DeepSpeed", logging.INFO, __file__, 1, line, None, None)
        assert not logging.getLogger("DeepSpeed").filter(record), line
    other = logging.LogRecord("DeepSpeed", logging.WARNING, __file__, 1, "ZeRO-3: parameter offload failed", None, None)
    assert logging.getLogger("DeepSpeed").filter(other)  # everything else it says still shows


@pytest.fixture(scope="module")
def trajectories(bench, tiny_model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collect")
    return collect_trajectories(CollectConfig(max_tasks=2, misleading_rate=0.0, seed=1),
                                {"bench": bench, "base_model": tiny_model_dir}, out).outputs["trajectories"]


@pytest.mark.usefixtures("prefect_server")  # measured 3.6 s of its own (server and fixtures: 13 s, shared)
def test_sft_stage_inside_a_printing_flow_shows_no_bytecode(trajectories, tiny_model_dir, skillgate_home):
    from prefect import flow

    from flows.stage_flows import STAGE_FLOWS

    @flow(log_prints=True)  # as the entry flow `skillgate` is declared
    def entry() -> dict:
        return STAGE_FLOWS["sft"]({"max_steps": 1, "per_device_batch_size": 1, "only_resolved": False},
                                  {"base_model": str(tiny_model_dir), "trajectories": str(trajectories)})

    # What Prefect logs is what the user reads (the page of bytecode came as "Task run 'sft' - ..."
    # records). Records, not capfd: a Prefect console handler set up inside a test's fd capture keeps
    # writing to it after the test closed it (the next flow test then fails on a closed file).
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]  # collect, format nothing
    logging.getLogger("prefect").addHandler(handler)
    try:
        record = entry()
    finally:
        logging.getLogger("prefect").removeHandler(handler)
    assert record["metrics"]["steps"] == 1
    assert records, "the flow logged nothing: the check would pass vacuously"
    text = "\n".join(r.getMessage() for r in records)
    for marker in DISASSEMBLY:
        assert marker not in text, marker

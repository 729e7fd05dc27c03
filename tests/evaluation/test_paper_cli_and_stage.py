"""`skillgate paper build`, the `paper-tables` stage (run_stage and its Prefect sub-flow + artifact)."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from paper_rows import synthetic_rows, write_synthetic_evals, write_synthetic_training
from PIL import Image
from support.skillgate_cli import run_skillgate

from skillgate_core.base.config import ConfigError, config_to_dict
from skillgate_core.base.paths import state_layout
from skillgate_core.evaluation.paper_config import PaperConfig
from skillgate_core.evaluation.rows import EVAL_TRIALS_FILE, write_eval_rows
from skillgate_core.pipeline.recipes import find_recipe, plan_recipe, resolve_recipe
from skillgate_core.pipeline.run import run_stage
from skillgate_core.pipeline.stages import get_stage
from tasks.artifact_images import MAX_WIDTH

RECIPES = Path(__file__).resolve().parents[2] / "deployments" / "recipes"


@pytest.fixture(scope="module")
def rows_with_training(tmp_path_factory) -> Path:
    """An eval_rows folder that also carries its experiments' training files (what the stage reads)."""
    root = tmp_path_factory.mktemp("stage-rows") / "eval_rows"
    write_synthetic_evals(root)
    write_synthetic_training(root / "training")
    return root


def test_cli_build_and_refusal(rows_with_training, tmp_path):
    out = tmp_path / "paper"
    proc = run_skillgate("paper", "build", str(rows_with_training), "--out", str(out), "bootstrap_seed=1",
                         home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert "240 trials of 3 method(s) on 1 protocol(s), 4 training file(s)" in proc.stdout
    assert "eval70_v1__mixed__r4/trial_success:" in proc.stdout and "10 tables (20 files), 7 figures" in proc.stdout
    assert json.loads((out / "paper.json").read_text())["config"]["bootstrap_seed"] == 1

    bad = tmp_path / "bad"
    shutil.copytree(rows_with_training, bad)
    path = bad / "mixed_task_reward" / EVAL_TRIALS_FILE
    write_eval_rows([{**r, "fingerprint": "9" * 64} for r in pq.read_table(path).to_pylist()], path)
    proc = run_skillgate("paper", "build", str(bad), "--out", str(tmp_path / "x"), home=tmp_path / "home")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "mixed_task_reward=9999999999" in proc.stderr and "refusing to compare" in proc.stderr
    proc = run_skillgate("paper", "build", str(bad), "--out", str(tmp_path / "x"), "bootstrap_resamples=100",
                         home=tmp_path / "home")
    assert proc.returncode == 2 and "bootstrap_resamples: expected int >= 10000, got 100" in proc.stderr


def test_stage_is_registered_with_a_frozen_config():
    spec = get_stage("paper-tables")
    assert spec.built and spec.inputs == ("eval_rows",) and spec.outputs == ("report",)
    assert spec.config_class() is PaperConfig
    with pytest.raises(ConfigError, match="confidence: expected float in \\(0, 1\\), got 1.5"):
        resolve_recipe(find_recipe("eval70", RECIPES), ["paper-tables.confidence=1.5"])
    assert PaperConfig().length_bin_edges == (0, 1024, 2048, 4096, 8192)
    assert PaperConfig(first_length_bin=500, length_bins=3).length_bin_edges == (0, 500, 1000)
    _, tables = plan_recipe(resolve_recipe(find_recipe("eval70", RECIPES)))
    assert tables.built and tables.inputs == {"eval_rows": "stage:eval70"} and not tables.missing


def test_stage_runs_through_run_stage_and_is_reused(rows_with_training, skillgate_home):
    record = run_stage("paper-tables", PaperConfig(), {"eval_rows": rows_with_training}, state_layout())
    report = Path(record.outputs["report"])
    assert (report / "report.md").is_file() and (report / "paper.json").is_file()
    assert (report / "tables" / "training" / "credit_starvation.tex").is_file()  # training files inside eval_rows
    assert record.metrics["figures"] == 7 and record.metrics["trials"] == 240
    again = run_stage("paper-tables", PaperConfig(), {"eval_rows": rows_with_training}, state_layout())
    assert again.reused and again.output_digests == record.output_digests


@pytest.mark.usefixtures("prefect_server")
def test_stage_sub_flow_publishes_the_report_artifact(rows_with_training, skillgate_home):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.stage_flows import STAGE_FLOWS

    result = STAGE_FLOWS["paper-tables"](config=config_to_dict(PaperConfig()),
                                         inputs={"eval_rows": str(rows_with_training)})
    report = Path(result["outputs"]["report"])
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["paper-report"])))
    assert artifacts, "no paper-report artifact"
    markdown = artifacts[-1].data
    assert markdown.startswith("# SkillGate: paper tables and figures") and "### Main results" in markdown
    # each figure inside the artifact (a browser never loads file:// from the UI), small, full size named
    images = re.findall(r"!\[[^\]]*\]\((data:image/png;base64,[A-Za-z0-9+/=]+)\)", markdown)
    assert len(images) == result["metrics"]["figures"] and "](figures/" not in markdown and "file://" not in markdown
    assert all(len(uri) < 200_000 for uri in images)
    with Image.open(io.BytesIO(base64.b64decode(images[0].split(",", 1)[1]))) as first:
        assert first.width <= MAX_WIDTH and first.getextrema() != ((0, 0),)  # a real, downscaled picture
    assert "(full size: `figures/eval70_v1__mixed__r4/selector_tradeoff.png` in the report folder)" in markdown
    assert str(report) not in markdown


def test_cli_on_one_repeat_rows_picks_k_with_a_note_and_an_explicit_k_is_a_clear_error(tmp_path):
    # The default k = 4 on the rows of a 1-repeat evaluation was a ValueError traceback. Without k= the
    # CLI uses the fewest trials per task and says so (console, report.md, paper.json); an explicit k
    # the rows cannot give is an error naming the fix.
    root = tmp_path / "rows"
    for method, rows in synthetic_rows().items():
        one = [{**r, "protocol_id": r["protocol_id"].replace("__r4__", "__r1__")} for r in rows if r["repeat"] == 0]
        (root / method).mkdir(parents=True)
        write_eval_rows(one, root / method / EVAL_TRIALS_FILE)
    out = tmp_path / "paper"
    proc = run_skillgate("paper", "build", str(root), "--out", str(out), home=tmp_path / "home")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    note = "pass@k uses k = 1: these rows hold 1 trial per task, fewer than the default k = 4"
    assert note in " ".join(proc.stdout.split()), proc.stdout
    assert note in (out / "report.md").read_text()
    section = json.loads((out / "paper.json").read_text())["protocols"]
    assert [(p["k"], p["k_note"].startswith(note)) for p in section.values()] == [(1, True)]

    proc = run_skillgate("paper", "build", str(root), "--out", str(tmp_path / "x"), "k=4", home=tmp_path / "home")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    err = " ".join(proc.stderr.split())
    assert "pass@4 needs >= 4 trials per task" in err and "k=1" in err, err
    assert not (tmp_path / "x").exists()

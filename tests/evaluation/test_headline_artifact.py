"""The entry run's headline artifact: per arm trial success, oracle exposure and clean-oracle rate from
the summaries the eval stage wrote, and where the report is, from the state dir (no machine path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paper_rows import synthetic_rows

from skillgate_core.evaluation.trials import summarize_rows
from tasks.headline import HEADLINE_KEY, arm_rows, headline_markdown, publish_headline


def _results(home: Path) -> dict[str, dict]:
    """What the entry flow holds after a run of two eval70 entries and a paper-tables entry."""
    results: dict[str, dict] = {"sft": {"outputs": {"sft_model": str(home / "artifacts" / "sft" / "k0" / "model")}}}
    for entry, method in (("eval-skillgate", "selector_clean_oracle_action_credit"),
                          ("eval-mixed", "mixed_task_reward")):
        rows_dir = home / "artifacts" / "eval70" / entry / "eval_rows"
        rows_dir.mkdir(parents=True)
        summary = {**summarize_rows(synthetic_rows()[method]), "method": method, "protocol_id": "eval70_v1__x"}
        (rows_dir / "summary.json").write_text(json.dumps(summary))
        results[entry] = {"outputs": {"eval_rows": str(rows_dir)}}
    results["paper"] = {"outputs": {"report": str(home / "artifacts" / "paper-tables" / "k1" / "report")}}
    return results


def test_the_headline_has_each_arms_numbers_and_the_report_from_the_state_dir(tmp_path):
    home = tmp_path / "home"
    results = _results(home)
    markdown = headline_markdown("demo", results, home)
    assert markdown is not None
    arms = arm_rows(results)
    assert [a["arm"] for a in arms] == ["eval-skillgate", "eval-mixed"]
    for arm in arms:
        s = json.loads((Path(results[arm["arm"]]["outputs"]["eval_rows"]) / "summary.json").read_text())
        n = s["trials"]
        row = (f"| {arm['name']} | {s['trial_success']:.3f} "
               f"({round(s['trial_success'] * n)}/{n}) | {s['oracle_exposure']:.3f} | {s['clean_oracle_rate']:.3f} |")
        assert row in markdown, row
        assert f"- {arm['name']}: method `{s['method']}`, entry `{arm['arm']}`, protocol `{s['protocol_id']}`" in markdown
    # each arm named by what it trained with (an entry name like eval70 says nothing of the arm), and a
    # table narrow enough for the UI's pane: no long-id column beside the numbers
    assert [a["name"] for a in arms] == ["SkillGate", "mixed_task_reward"]
    header = next(line for line in markdown.splitlines() if line.startswith("| arm"))
    assert header == "| arm | trial success | oracle exposure | clean-oracle rate | errors |"
    assert arms[0]["oracle_exposure"] != arms[1]["oracle_exposure"]  # the two arms' own numbers, not one copied
    assert "Report: `SKILLGATE_HOME/artifacts/paper-tables/k1/report/report.md`" in markdown
    assert str(tmp_path) not in markdown and "/tmp/" not in markdown and "file://" not in markdown


def test_no_headline_without_an_evaluation_or_a_report(tmp_path):
    assert headline_markdown("init-model", {"init-model": {"outputs": {"base_model": str(tmp_path)}}}, tmp_path) is None


@pytest.mark.usefixtures("prefect_server")
def test_the_headline_is_an_artifact_of_the_flow_run(tmp_path):
    from prefect import flow
    from prefect.artifacts import Artifact

    home = tmp_path / "home"
    results = _results(home)

    @flow
    def entry() -> bool:
        return publish_headline("demo", results, home)

    assert entry() is True
    artifact = Artifact.get(HEADLINE_KEY)
    assert artifact is not None and artifact.data == headline_markdown("demo", results, home)

"""The paper build from a fixed synthetic evaluation: every table and figure, byte-identical twice,
figures whose axis labels are read back from the PNG files, the comparison-hygiene refusal, the paired
bootstrap of every method against the baseline and the claim check under it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from paper_rows import (
    FINGERPRINT,
    PROTOCOL_ID,
    selection_rows,
    synthetic_rows,
    write_synthetic_evals,
    write_synthetic_training,
)
from PIL import Image

from skillgate_core.evaluation.metrics import Trial
from skillgate_core.evaluation.paper import PaperOutputError, build_paper
from skillgate_core.evaluation.paper_config import PaperConfig
from skillgate_core.evaluation.protocol import ProtocolMismatchError
from skillgate_core.evaluation.rows import (
    EVAL_TRIALS_FILE,
    EvalRowsError,
    group_by_protocol,
    read_eval_rows,
    write_eval_rows,
)
from skillgate_core.evaluation.tables import credit_starvation_bins, main_results_table, read_strata, to_latex

SECTION = "eval70_v1__mixed__r4"
TABLES = ("main_results", "paired_bootstrap", "paired_bootstrap_methods", "credit_ablation", "selector_tradeoff",
          "read_strata", "behaviour_cost", "premise")
FIGURES = ("main_results", "paired_bootstrap", "paired_bootstrap_methods", "selector_tradeoff", "read_strata")
STATISTICS = ["trial_success", "pass@4", "oracle_exposure", "clean_oracle_rate"]
TRAINING_TABLES = ("training_summary", "credit_starvation")
TRAINING_FIGURES = ("training_selection", "credit_starvation")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("paper-inputs")
    return write_synthetic_evals(root / "rows"), write_synthetic_training(root / "training")


@pytest.fixture(scope="module")
def built(inputs, tmp_path_factory) -> Path:
    rows, training = inputs
    out = tmp_path_factory.mktemp("paper") / "out"
    build_paper(rows, out, PaperConfig(), training_dirs=[training])
    return out


def test_synthetic_set_shape(inputs):
    rows = read_eval_rows(inputs[0])
    assert len(rows) == 3 * 2 * 10 * 4
    (methods,) = group_by_protocol(rows).values()
    assert [len(m.trials) for m in methods] == [80, 80, 80]
    assert {r["outcome"] for r in rows} == {"resolved", "fail", "error"}  # errors are in the fixture


def test_every_table_and_figure_is_written(built):
    for key in TABLES:
        for ext in ("md", "tex"):
            assert (built / "tables" / SECTION / f"{key}.{ext}").stat().st_size > 0, key
    for key in TRAINING_TABLES:
        for ext in ("md", "tex"):
            assert (built / "tables" / "training" / f"{key}.{ext}").stat().st_size > 0, key
    pngs = [built / "figures" / SECTION / f"{k}.png" for k in FIGURES]
    pngs += [built / "figures" / "training" / f"{k}.png" for k in TRAINING_FIGURES]
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000, png
    report = (built / "report.md").read_text()
    for png in pngs:
        assert f"]({png.relative_to(built).as_posix()})" in report  # each figure linked from the report
    doc = json.loads((built / "paper.json").read_text())
    section = doc["protocols"][SECTION]
    assert sorted(section["tables"]) == sorted(TABLES) and sorted(section["figures"]) == sorted(FIGURES)
    assert sorted(doc["training"]["tables"]) == sorted(TRAINING_TABLES)
    assert section["fingerprint"] == FINGERPRINT and section["protocol_ids"] == [PROTOCOL_ID]
    assert len(doc["inputs"]["eval_rows"]) == 3 and len(doc["inputs"]["training"]) == 4
    boot = section["tables"]["paired_bootstrap"]["data"][0]
    assert boot["scope"] == "all" and boot["resamples"] == 10_000
    assert boot["method"] == "selector_clean_oracle_action_credit" and boot["baseline"] == "mixed_task_reward"
    assert [i["statistic"] for i in boot["intervals"]] == STATISTICS
    for i in boot["intervals"]:
        assert i["ci_low"] <= i["difference"] <= i["ci_high"]
    # the ablation lists configured methods without rows instead of dropping them silently
    assert section["tables"]["credit_ablation"]["data"]["absent"] == [
        "selector_clean_oracle_masked_task_only", "hybrid_slate", "mixed_separated"]


def test_paper_json_numbers_match_the_raw_rows(built, inputs):
    doc = json.loads((built / "paper.json").read_text())
    for method, rows in synthetic_rows().items():
        metrics = doc["protocols"][SECTION]["methods"][method]["metrics"]
        assert metrics["trials"] == len(rows) == 80
        assert metrics["resolved"] == sum(r["outcome"] == "resolved" for r in rows)
        assert metrics["errors"] == sum(r["outcome"] == "error" for r in rows)
        assert metrics["trial_success"] == metrics["resolved"] / 80
        solved = {r["task_id"] for r in rows if r["outcome"] == "resolved"}
        assert metrics["pass@4"] == len(solved) / 20
        assert metrics["cost"]["turns_per_trial"] == sum(r["turns"] for r in rows) / 80


def test_build_is_byte_identical(built, inputs, tmp_path):
    rows, training = inputs
    # a copy of the inputs elsewhere, built into another folder: nothing depends on absolute paths
    moved = tmp_path / "elsewhere"
    shutil.copytree(rows, moved / "rows")
    shutil.copytree(training, moved / "training")
    again = tmp_path / "again"
    build_paper(moved / "rows", again, PaperConfig(), training_dirs=[moved / "training"])
    first, second = _tree(built), _tree(again)
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], name
    # rebuilding into an existing paper build replaces it with the same bytes
    build_paper(moved / "rows", again, PaperConfig(), training_dirs=[moved / "training"])
    assert _tree(again) == first


def test_png_text_chunks_carry_axis_labels_with_units(built):
    expected = {
        f"{SECTION}/selector_tradeoff.png": [("oracle read first (% of trials)", "trial success (% of trials)")],
        f"{SECTION}/main_results.png": [("benchmark (family)", "trial success (% of trials)"),
                                        ("benchmark (family)", "pass@4 (% of tasks)")],
        "training/credit_starvation.png": [("response length bin (generated tokens)", "share of loss tokens (%)"),
                                           ("response length bin (generated tokens)",
                                            "oracle reads with a negative advantage (%)")],
    }
    for png in sorted((built / "figures").rglob("*.png")):
        with Image.open(png) as image:
            text = dict(image.text)
        assert "Software" not in text and "Creation Time" not in text, png  # no tool tag, no timestamp
        axes = json.loads(text["Axes"])
        assert axes and text["Title"], png
        for ax in axes:
            for label in (ax["xlabel"], ax["ylabel"]):
                assert label and "(" in label and label.endswith(")"), (png, label)  # a unit in parentheses
        rel = png.relative_to(built / "figures").as_posix()
        if rel in expected:
            assert [(a["xlabel"], a["ylabel"]) for a in axes] == expected[rel]
    boot = json.loads(Image.open(built / "figures" / SECTION / "paired_bootstrap.png").text["Axes"])
    assert [a["xlabel"] for a in boot] == [f"{s} difference, method - baseline (percentage points)" for s in STATISTICS]
    assert all(a["ylabel"] == "bootstrap resamples (count of 10000)" for a in boot)


def _rewrite(path: Path, **changes) -> None:
    rows = pq.read_table(path).to_pylist()
    write_eval_rows([{**r, **changes} for r in rows], path)


def test_mixed_fingerprints_are_refused_naming_both(inputs, tmp_path):
    rows = tmp_path / "rows"
    shutil.copytree(inputs[0], rows)
    other = "9" * 64
    _rewrite(rows / "mixed_task_reward" / EVAL_TRIALS_FILE, fingerprint=other,
             protocol_id=f"eval70_v1__mixed__r4__{other[:10]}")
    out = tmp_path / "out"
    with pytest.raises(ProtocolMismatchError) as err:
        build_paper(rows, out)
    message = str(err.value)
    assert message.startswith("table main_results: rows come from 2 protocol fingerprints")
    assert f"mixed_task_reward={other[:10]}" in message
    assert f"selector_clean_oracle_action_credit={FINGERPRINT[:10]}" in message
    assert not out.exists()  # refused before anything is written


def test_each_table_refuses_mixed_fingerprints(inputs):
    (methods,) = group_by_protocol(read_eval_rows(inputs[0])).values()
    odd = methods[0].__class__(**{**methods[0].__dict__, "fingerprints": ("f" * 64,)})
    with pytest.raises(ProtocolMismatchError, match="ffffffffff"):
        main_results_table([odd, *methods[1:]], k=4)


def test_protocols_with_different_spec_ids_get_separate_sections(inputs, tmp_path):
    rows = tmp_path / "rows"
    shutil.copytree(inputs[0], rows)
    other = "8" * 64
    shutil.copytree(rows / "mixed_task_reward", rows / "claw" / "mixed_task_reward")
    _rewrite(rows / "claw" / "mixed_task_reward" / EVAL_TRIALS_FILE, fingerprint=other,
             protocol_id=f"claw147_v1__mixed__r4__{other[:10]}")
    built = build_paper(rows, tmp_path / "out")
    assert built.metrics["protocols"] == ["claw147_v1__mixed__r4", SECTION]
    doc = json.loads((tmp_path / "out" / "paper.json").read_text())
    claw = doc["protocols"]["claw147_v1__mixed__r4"]
    assert list(claw["methods"]) == ["mixed_task_reward"] and claw["fingerprint"] == other
    assert claw["bootstrap"]["skipped"] == "no rows for method(s) selector_clean_oracle_action_credit"
    assert claw["claim_check"]["skipped"] == claw["bootstrap"]["skipped"]
    assert claw["tables"]["paired_bootstrap_methods"]["data"]["comparisons"] == []  # the baseline alone
    assert "**Claim check**: not made (no rows for method(s) selector_clean_oracle_action_credit)." in (
        tmp_path / "out" / "report.md").read_text()
    assert (tmp_path / "out" / "tables" / "claw147_v1__mixed__r4" / "main_results.md").is_file()


def test_vector_9_through_the_paper_build(tmp_path):
    base = {"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "task_id": "t", "benchmark": "b",
            "reads": [], "read_names": [], "status": "completed"}
    for method in ("selector_clean_oracle_action_credit", "mixed_task_reward"):
        rows = [{**base, "method": method, "repeat": r, "outcome": o,
                 "status": "aborted" if o == "error" else "completed"}
                for r, o in enumerate(["resolved", "fail", "error", "fail"])]
        write_eval_rows(rows, tmp_path / "rows" / method / EVAL_TRIALS_FILE)
    build_paper(tmp_path / "rows", tmp_path / "out")
    main = json.loads((tmp_path / "out" / "paper.json").read_text())["protocols"][SECTION]["tables"]["main_results"]
    row = main["data"][0]["by_benchmark"]["all"]
    assert (row["trial_success"], row["pass@4"], row["errors"]) == (0.25, 1.0, 1)
    assert main["rows"][0] == ["mixed_task_reward", "25.0 (1/4)", "100.0 (1/1)", "25.0 (1/4)", "100.0 (1/1)", "1",
                               "0.0 (0/4)", "0.0 (0/4)", "0.0 (0/4)"]


def test_the_premise_table_by_hand(tmp_path):
    """docs/method.md 8b from raw rows: one arm whose rows count their tokens, one written before the columns."""
    base = {"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "task_id": "t", "benchmark": "b",
            "status": "completed", "turns": 4, "loss_tokens": 100}
    # (reads, outcome): a clean resolved read, a clean failed read, a recovery that resolved, a lookalike, an error
    trials = [(["oracle"], "resolved"), (["oracle"], "fail"), (["misleading", "oracle"], "resolved"),
              (["misleading"], "fail"), (["oracle"], "error")]
    for method, counted in (("selector_clean_oracle_action_credit", True), ("mixed_task_reward", False)):
        rows = []
        for r, (reads, outcome) in enumerate(trials):
            row = {**base, "method": method, "repeat": r, "outcome": outcome, "reads": reads,
                   "read_names": [f"t-{c}" for c in reads], "first_read_category": reads[0],
                   "status": "aborted" if outcome == "error" else "completed"}
            if counted:
                row.update(name_tokens=2 * len(reads), read_call_tokens=10 * len(reads), reasoning_tokens=25)
            rows.append(row)
        write_eval_rows(rows, tmp_path / "rows" / method / EVAL_TRIALS_FILE)
    build_paper(tmp_path / "rows", tmp_path / "out")
    table = json.loads((tmp_path / "out" / "paper.json").read_text())["protocols"][SECTION]["tables"]["premise"]
    assert [d["method"] for d in table["data"]] == ["mixed_task_reward", "selector_clean_oracle_action_credit"]
    # 4 trials (the error left out), 3 oracle readers of which 2 disagree (clean but failed; resolved unclean)
    old, new = table["rows"]
    assert new == ["selector_clean_oracle_action_credit", "4", "3", "66.7 (2/3)", "33.3 (1/3)", "33.3 (1/3)", "4",
                   "2.50", "12.50", "25.00", "100", "4.0", "25.0 (1/4)", "50.0 (1/2)", "100.0 (1/1)"]
    assert old[:7] == ["mixed_task_reward", "4", "3", "66.7 (2/3)", "33.3 (1/3)", "33.3 (1/3)", "-"]
    assert old[7:10] == ["-", "-", "-"] and table["data"][0]["token_episodes"] == 0
    assert "### Premise checks" in (tmp_path / "out" / "report.md").read_text()


def test_read_strata_and_credit_bins_by_hand():
    (methods,) = group_by_protocol(read_eval_rows_from([
        ("a", "resolved", ["oracle"]), ("a", "fail", ["oracle", "misleading"]), ("a", "fail", []),
        ("a", "resolved", ["oracle"]), ("b", "fail", ["misleading"]), ("b", "error", []), ("b", "fail", ["relevant"]),
        ("b", "resolved", ["oracle", "oracle"])])).values()
    strata = read_strata(methods, max_strata=3)
    assert strata["strata"] == ["[O]", "[]", "[M]", "other"]  # most frequent first, ties by name
    cells = {s: strata["cells"][s]["m"] for s in strata["strata"]}
    assert cells == {"[O]": {"trials": 2, "resolved": 2}, "[]": {"trials": 2, "resolved": 0},
                     "[M]": {"trials": 1, "resolved": 0}, "other": {"trials": 3, "resolved": 1}}
    assert strata["pooled_as_other"] == ["[O,M]", "[O,O]", "[R]"]
    episodes = [{"profile": "p", "step": 0, "response_tokens": n, "loss_tokens": n, "read_call_tokens": rc,
                 "identity_tokens": i, "oracle_actions": o, "oracle_negative_actions": neg}
                for n, rc, i, o, neg in ((500, 20, 2, 1, 0), (1023, 0, 0, 0, 0), (1024, 40, 4, 2, 1),
                                         (5000, 20, 2, 1, 1))]
    bins = credit_starvation_bins(episodes, (0, 1024, 4096))
    assert [(b["bin"], b["episodes"]) for b in bins] == [("0-1023", 2), ("1024-4095", 1), (">=4096", 1)]
    assert bins[0]["read_call_token_share"] == 20 / 1523 and bins[0]["identity_token_share"] == 2 / 1523
    assert bins[1]["oracle_negative_advantage_rate"] == 0.5 and bins[2]["oracle_negative_advantage_rate"] == 1.0


def read_eval_rows_from(spec: list[tuple[str, str, list[str]]]) -> list[dict]:
    counter: dict[str, int] = {}
    rows = []
    for task, outcome, reads in spec:
        counter[task] = counter.get(task, -1) + 1
        rows.append({"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "method": "m", "task_id": task,
                     "benchmark": "b", "repeat": counter[task], "outcome": outcome, "reads": reads,
                     "read_names": [f"{task}-{c}" for c in reads], "source": "x"})
    return rows


def test_latex_escapes_and_output_folder_rules(built, tmp_path):
    tex = (built / "tables" / SECTION / "main_results.tex").read_text()
    assert r"mixed\_task\_reward" in tex and r"success \%" in tex and r"\label{tab:main_results}" in tex
    assert "_" not in tex.replace(r"\_", "").replace(r"\label{tab:main_results}", "")
    from skillgate_core.evaluation.tables import Table
    assert r"a\&b \$ \#1 $>$=2" in to_latex(Table("k", "t", "c", ("x",), (("a&b $ #1 >=2",),), []))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(PaperOutputError, match="not empty and not an earlier paper build"):
        build_paper(_tiny_rows(tmp_path), busy)
    assert (busy / "notes.txt").read_text() == "mine"


def _tiny_rows(tmp_path: Path) -> Path:
    rows = [{"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "method": "m", "task_id": "t", "benchmark": "b",
             "repeat": r, "outcome": "fail", "reads": [], "read_names": []} for r in range(4)]
    return write_eval_rows(rows, tmp_path / "tiny" / EVAL_TRIALS_FILE).parent


def test_bad_rows_are_refused_with_the_file_named(tmp_path):
    path = tmp_path / "rows" / EVAL_TRIALS_FILE
    base = {"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "method": "m", "task_id": "t", "benchmark": "b",
            "repeat": 0, "reads": ["oracle"], "read_names": ["o"]}
    write_eval_rows([{**base, "outcome": "timeout"}], path)
    with pytest.raises(EvalRowsError, match=r"eval_trials.parquet row 0: outcome 'timeout'"):
        read_eval_rows(tmp_path / "rows")
    write_eval_rows([{**base, "outcome": "fail", "status": "aborted"}], path)
    with pytest.raises(EvalRowsError, match="an aborted trial must have outcome 'error'"):
        read_eval_rows(tmp_path / "rows")
    write_eval_rows([{**base, "outcome": "fail", "first_read_category": "misleading"}], path)
    with pytest.raises(EvalRowsError, match="first_read_category 'misleading' disagrees"):
        read_eval_rows(tmp_path / "rows")
    write_eval_rows([{**base, "outcome": "fail", "first_read_category": "oracle"}] * 2, path)
    with pytest.raises(EvalRowsError, match="trial t#0 of export \\? appears twice"):
        group_by_protocol(read_eval_rows(tmp_path / "rows"))
    with pytest.raises(FileNotFoundError, match="no eval_trials.parquet"):
        read_eval_rows(tmp_path / "empty-dir-that-is-not-there")
    assert Trial.from_row({**base, "outcome": "fail"}).first_read == "oracle"


def test_training_files_other_than_training_rows_are_listed_as_ignored(tmp_path):
    rows = _tiny_rows(tmp_path)
    (rows / "metrics.jsonl").write_text('{"trial_success": 0.5}\n')  # an evaluation's own summary, not training
    build_paper(rows, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "paper.json").read_text())
    assert doc["training"] is None
    assert doc["inputs"]["training"][0]["source"] == "metrics.jsonl" and doc["inputs"]["training"][0]["ignored"]
    (rows / "metrics.jsonl").write_text('{"step": 0, "profile": "p"}\n{"step": 1}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl row 2: missing key\(s\) profile"):
        build_paper(rows, tmp_path / "out")


@pytest.mark.parametrize("protocol_id", ["../../escaped__mixed__r4__3fa2c01b9e", "/tmp/abs__mixed__r4__3fa2c01b9e",
                                         "..", "a/b"])
def test_a_protocol_id_that_would_name_a_path_outside_the_report_is_refused(tmp_path: Path, protocol_id: str):
    """Protocol ids come from the rows read: they are checked before they name a section folder."""
    rows = [{**r, "protocol_id": protocol_id} for r in synthetic_rows()["mixed_task_reward"]]
    write_eval_rows(rows, tmp_path / "rows" / "m" / EVAL_TRIALS_FILE)
    out = tmp_path / "deep" / "er" / "paper"
    with pytest.raises(EvalRowsError, match=r"eval_trials.parquet row 0: protocol_id .* cannot name a folder"):
        build_paper(tmp_path / "rows", out)
    assert not out.exists() and not (tmp_path / "deep" / "escaped__mixed__r4").exists()
    assert not [p for p in tmp_path.rglob("*.md")]


def test_the_main_table_shows_selection_and_the_probe_beside_each_methods_rows(tmp_path):
    base = {"protocol_id": PROTOCOL_ID, "fingerprint": FINGERPRINT, "benchmark": "b", "status": "completed"}
    reads = {"selector_clean_oracle_action_credit": [(["oracle"], ["o"]), (["oracle", "oracle"], ["o", "o"]),
                                                     (["misleading"], ["m"]), ([], [])],
             "mixed_task_reward": [(["misleading"], ["m"]), (["oracle", "misleading"], ["o", "m"]), ([], []), ([], [])]}
    for method, trials in reads.items():
        rows = [{**base, "method": method, "task_id": "t", "repeat": r, "outcome": "fail", "reads": cats,
                 "read_names": names, "first_read_category": cats[0] if cats else None}
                for r, (cats, names) in enumerate(trials)]
        write_eval_rows(rows, tmp_path / "rows" / method / EVAL_TRIALS_FILE)
    probe = {"fingerprint": FINGERPRINT, "method": "selector_clean_oracle_action_credit", "tasks": 70,
             "oracle_rank1_rate": 0.2, "oracle_rank1_ci": [0.114, 0.3], "oracle_mass": 0.17, "misleading_mass": 0.8,
             "relevant_mass": 0.02, "irrelevant_mass": 0.01, "turn": "call"}
    (tmp_path / "rows" / "selector_clean_oracle_action_credit" / "probe_summary.json").write_text(json.dumps(probe))
    build_paper(tmp_path / "rows", tmp_path / "out")
    main = json.loads((tmp_path / "out" / "paper.json").read_text())["protocols"][SECTION]["tables"]["main_results"]
    assert main["columns"][-4:] == ["oracle exposure %", "misleading exposure %", "clean-oracle %",
                                    "probe oracle@1 % [95% CI]"]
    by_method = {row[0]: row[-4:] for row in main["rows"]}
    # oracle exposure, misleading exposure, clean oracle ([O,O] counts, [O,M] does not), the probe or '-'
    assert by_method["selector_clean_oracle_action_credit"] == ["50.0 (2/4)", "25.0 (1/4)", "50.0 (2/4)",
                                                                "20.0 [11.4, 30.0]"]
    assert by_method["mixed_task_reward"] == ["25.0 (1/4)", "50.0 (2/4)", "0.0 (0/4)", "-"]


SKILLGATE, BASELINE = "selector_clean_oracle_action_credit", "mixed_task_reward"


def test_every_method_with_rows_is_compared_to_the_baseline(built):
    doc = json.loads((built / "paper.json").read_text())
    section = doc["protocols"][SECTION]
    table = section["tables"]["paired_bootstrap_methods"]
    comparisons = table["data"]["comparisons"]
    # SkillGate first, then the rest; every method with rows but the baseline, each against the baseline
    assert [c["method"] for c in comparisons] == [SKILLGATE, "selector_action_credit"]
    assert {c["baseline"] for c in comparisons} == {BASELINE} and table["data"]["skipped"] == []
    for c in comparisons:
        assert [i["statistic"] for i in c["intervals"]] == STATISTICS and c["resamples"] == 10_000
    # the same draws as the SkillGate table: its all-tasks rows are the same numbers
    overall = section["tables"]["paired_bootstrap"]["data"][0]
    assert comparisons[0]["intervals"] == overall["intervals"]
    assert [row[:2] for row in table["rows"]] == [[m, s] for m in (SKILLGATE, "selector_action_credit")
                                                  for s in STATISTICS]
    axes = json.loads(Image.open(built / "figures" / SECTION / "paired_bootstrap_methods.png").text["Axes"])
    assert [a["title"] for a in axes] == STATISTICS


def _claim_rows(root: Path, arms: dict[str, dict[str, int]]) -> Path:
    for method, oracle_trials in arms.items():
        write_eval_rows(selection_rows(method, oracle_trials), root / method / EVAL_TRIALS_FILE)
    return root


BASELINE_ORACLE = {f"t{i:02d}": i % 2 for i in range(12)}          # 0 or 1 of 4 trials read the oracle
MORE_ORACLE = {f"t{i:02d}": i % 2 + 1 + i % 3 for i in range(12)}   # 1-3 more in every task


def test_claim_line_and_an_sft_arm_through_the_build(tmp_path):
    rows = _claim_rows(tmp_path / "rows", {BASELINE: BASELINE_ORACLE, SKILLGATE: MORE_ORACLE, "sft": BASELINE_ORACLE,
                                           # an arm evaluated on fewer tasks: no comparison, the rest stand
                                           "selector_action_credit": dict(list(MORE_ORACLE.items())[:6])})
    built = build_paper(rows, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "paper.json").read_text())["protocols"][SECTION]
    data = doc["tables"]["paired_bootstrap_methods"]["data"]
    by_method = {c["method"]: {i["statistic"]: i for i in c["intervals"]} for c in data["comparisons"]}
    assert list(by_method) == [SKILLGATE, "sft"]  # sft labelled as its rows are
    assert [s["method"] for s in data["skipped"]] == ["selector_action_credit"]
    assert "were evaluated on different tasks" in data["skipped"][0]["reason"]
    exposure = by_method[SKILLGATE]["oracle_exposure"]
    assert exposure["difference"] == pytest.approx(0.5) and exposure["ci_low"] > 0  # the interval excludes 0
    assert by_method[SKILLGATE]["clean_oracle_rate"]["ci_low"] > 0
    for i in by_method["sft"].values():  # the same rows as the baseline: 0, with a [0, 0] interval
        assert (i["difference"], i["ci_low"], i["ci_high"]) == (0.0, 0.0, 0.0), i["statistic"]
    assert doc["claim_check"]["holds"] is True and built.metrics[f"{SECTION}/claim_holds"] is True
    report = (tmp_path / "out" / "report.md").read_text()
    claim = [line for line in report.splitlines() if line.startswith("**Claim check**")]
    assert len(claim) == 1 and "**holds**" in claim[0]
    assert "oracle exposure +50.0 pp [" in claim[0] and "trial success +0.0 pp [+0.0, +0.0]" in claim[0]
    # under the SkillGate bootstrap (after its figure), before the every-method table
    assert report.index("### Paired bootstrap: selector_clean_oracle_action_credit") < report.index(claim[0]) \
        < report.index("### Paired bootstrap: every method - mixed_task_reward")

    same = _claim_rows(tmp_path / "same", {BASELINE: BASELINE_ORACLE, SKILLGATE: BASELINE_ORACLE})
    built = build_paper(same, tmp_path / "out-same")
    report = (tmp_path / "out-same" / "report.md").read_text()
    assert "): **does not hold**. oracle exposure +0.0 pp [+0.0, +0.0] (needs the interval above 0: no)" in report
    assert built.metrics[f"{SECTION}/claim_holds"] is False


def test_training_rows_keep_each_arms_seed_and_variant_apart(tmp_path):
    """Two seeds and a labelled variant of one profile are three training runs, named as their eval rows are
    (the driver's training/<label>/ folders); a folder that is no arm label of the row's profile falls back to
    the profile with its variant."""
    from skillgate_core.evaluation.paper import read_training

    def write(folder: str, profile: str, variant: str) -> None:
        d = tmp_path / "training" / folder
        d.mkdir(parents=True)
        (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "profile": profile, "variant": variant,
                                                             "reward": 0.5}) + "\n" for s in (1, 2)))
        (d / "credit_episodes.jsonl").write_text(json.dumps(
            {"profile": profile, "step": 1, "response_tokens": 9, "loss_tokens": 9, "read_call_tokens": 1,
             "identity_tokens": 1, "oracle_actions": 1, "oracle_negative_actions": 0}) + "\n")

    sg = "selector_clean_oracle_action_credit"
    write(sg, sg, "")
    write(f"{sg}@s1", sg, "")
    write(f"{sg}+identity_first_mention", sg, "identity_first_mention")
    write("run-from-elsewhere", sg, "identity_first_mention")
    write("mixed_task_reward@s1", sg, "")  # a folder naming another profile: the row's own profile wins
    data = read_training([tmp_path])
    assert sorted((label, len(rows)) for label, _, rows in data.runs) == [
        (sg, 2), (sg, 2), (f"{sg}+identity_first_mention", 2), (f"{sg}+identity_first_mention", 2), (f"{sg}@s1", 2)]
    assert sorted(e["profile"] for e in data.episodes) == sorted(
        [sg, f"{sg}@s1", f"{sg}+identity_first_mention", sg, sg])

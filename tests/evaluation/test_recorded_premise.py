"""An evaluation's per-trial logs carry the premise facts of the trial rows beside them (recorded_episodes,
`skillgate traj show`); a missing or damaged row leaves the episode shown without them."""

from __future__ import annotations

import json
from pathlib import Path

from skillgate_core.evaluation.recorded_episodes import load_episodes, recorded_premise


def _trial(folder: Path, row_id: str, index: int, row: dict | str | None) -> None:
    (folder / "rows" / row_id).mkdir(parents=True)
    log = {"task_id": row_id, "repeat": 0, "status": "completed", "score": 1.0, "gold": "oracle-x",
           "slate": [["oracle-x", "oracle"]], "messages": [], "turns": []}
    (folder / "rows" / row_id / "trajectory.json").write_text(json.dumps(log))
    if row is not None:
        text = row if isinstance(row, str) else json.dumps({**row, "trial_index": index})
        (folder / "rows" / row_id / "row.json").write_text(text)


def test_each_log_gets_its_rows_facts_and_a_damaged_row_none(tmp_path: Path):
    base = {"benchmark": "b", "repeat": 0, "turns": 5, "loss_tokens": 200}
    _trial(tmp_path, "t0--r0", 0, {**base, "task_id": "t0", "outcome": "resolved", "reads": ["misleading", "oracle"],
                                   "read_names": ["misl-a", "oracle-x"], "name_tokens": 4, "read_call_tokens": 30,
                                   "reasoning_tokens": 50})
    _trial(tmp_path, "t1--r0", 1, {**base, "task_id": "t1", "outcome": "fail", "reads": ["oracle"],
                                   "read_names": ["oracle-x"]})  # written before the token columns
    _trial(tmp_path, "t2--r0", 2, "{not json")
    _trial(tmp_path, "t3--r0", 3, {**base, "task_id": "t3", "outcome": "maybe", "reads": [], "read_names": []})
    _trial(tmp_path, "t4--r0", 4, None)
    episodes = load_episodes(tmp_path)
    facts = {e.task_id: e.premise for e in episodes}
    t0, t1 = facts.pop("t0--r0"), facts.pop("t1--r0")
    assert t0 is not None and (t0.clean, t0.resolved, t0.name_tokens) == (False, True, 4)
    assert t1 is not None and t1.clean and not t1.resolved and not t1.tokens_measured
    assert facts == {"t2--r0": None, "t3--r0": None, "t4--r0": None}  # not JSON; an impossible outcome; no row
    numbers = recorded_premise(episodes)
    assert (numbers["episodes"], numbers["without_facts"], numbers["oracle_read_episodes"]) == (2, 3, 2)
    assert (numbers["p1_disagreement"], numbers["p1_clean_failed"], numbers["p1_unclean_resolved"]) == (2, 1, 1)
    assert (numbers["token_episodes"], numbers["name_token_share"]) == (1, 0.02)

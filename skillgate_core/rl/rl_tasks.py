"""The training prompts of a GRPO run, loaded from rl-data-prep's table (never recomputed).

    tasks = load_rl_tasks(rl_data_dir, bench_dir, scratch)   # list[RLTask], in table order

Each row's frozen slate order is checked against the task package's skills.json, and the prompt ids
are taken as rendered: a table built from another bench (or an edited package) is refused with the
task named, rather than silently training on prompts that no longer match the task. A row with
`skill_aliases` (rl-data-prep's renamed slates) gets the renamed slate and its skill folders renamed
the same way (skills.aliases), the names it was rendered with.
"""

from __future__ import annotations

import json
from pathlib import Path

from skillgate_core.base.safe_paths import UnsafeNameError, check_task_row
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.formats.slate_manifest import is_skill_name
from skillgate_core.policy.tokenizer_identity import tokenizer_digest
from skillgate_core.rl.data_prep import OUTPUT_FILE
from skillgate_core.rl.rollouts import RLTask
from skillgate_core.skills import read_slate, slate_skills_dir
from skillgate_core.skills.aliases import renamed_slate, write_renamed_skills

__all__ = ["RLTasksError", "load_rl_tasks"]


class RLTasksError(ValueError):
    """The RL table does not match the bench; the message names the task and the mismatch."""


def load_rl_tasks(rl_data: Path, bench: Path, scratch: Path, *, policy_dir: Path | None = None) -> list[RLTask]:
    """Every row of `rl_data/rl_train.parquet` as an RLTask; slate skill folders go under `scratch`.

    With `policy_dir`, the table must have been rendered with that policy's tokenizer (the prompt
    ids are token ids of ONE tokenizer: another one would train on ids that mean other text)."""
    from skillgate_core.base.parquet_rows import read_rows

    table = rl_data / OUTPUT_FILE if rl_data.is_dir() else rl_data
    if not table.is_file():
        raise RLTasksError(f"{table}: missing; expected the output of the rl-data-prep stage")
    tasks = []
    expected = tokenizer_digest(policy_dir) if policy_dir is not None else None
    for n, row in enumerate(read_rows(table)):
        try:  # both name paths (scratch/TASK_ID, bench/TASK_PATH): checked before either is used
            check_task_row(row, source=f"{table} row {n}", path_field="task_path")
        except UnsafeNameError as exc:
            raise RLTasksError(str(exc)) from None
        where = f"{table} task {row['task_id']}"
        if expected is not None and row["tokenizer_digest"] != expected:
            raise RLTasksError(f"{where}: rendered with tokenizer {row['tokenizer_digest'][:12]}, but the policy "
                               f"{policy_dir} has tokenizer {expected[:12]}; rerun rl-data-prep with this policy")
        package = bench / row["task_path"]
        slate = read_slate(package / "skills.json")
        frozen = [(e["name"], e["category"]) for e in row["slate"]]
        if [(e.name, e.category) for e in slate.entries] != frozen:
            raise RLTasksError(f"{where}: the slate order in {package / 'skills.json'} differs from the frozen one")
        if row["gold_name"] != slate.oracle:
            raise RLTasksError(f"{where}: gold skill {row['gold_name']!r} but the slate's oracle is {slate.oracle!r}")
        skills_dir = slate_skills_dir(bench / "skills", slate.names, scratch / row["task_id"])
        if row.get("skill_aliases"):
            mapping = _aliases(row["skill_aliases"], slate.names, where)
            slate = renamed_slate(slate, mapping)
            skills_dir = write_renamed_skills(mapping, skills_dir, scratch / f"{row['task_id']}.renamed")
        prompt = tuple(row["prompt_ids"]) if row.get("prompt_ids") is not None else ()
        no_skill = row.get("no_skill_prompt_ids")
        tasks.append(RLTask(
            task_id=row["task_id"],
            family=row["family"],
            task=load_task_package(package, within=bench),
            slate=slate,
            skills_dir=skills_dir,
            prompt_ids=prompt,
            no_skill_prompt_ids=tuple(no_skill) if no_skill is not None else None,
        ))
    if not tasks:
        raise RLTasksError(f"{table}: no training rows")
    return tasks


def _aliases(text: str, names: tuple[str, ...], where: str) -> dict[str, str]:
    """{old: new} from the row's JSON: exactly the slate's names, each to a distinct plain skill name."""
    try:
        mapping = json.loads(text)
    except ValueError as exc:
        raise RLTasksError(f"{where}: skill_aliases is not JSON: {exc}") from exc
    if (not isinstance(mapping, dict) or sorted(mapping) != sorted(names)
            or not all(is_skill_name(v) for v in mapping.values())
            or len(set(mapping.values())) != len(mapping)):
        raise RLTasksError(f"{where}: skill_aliases must map exactly the slate's names {sorted(names)} to distinct "
                           f"skill names (<= 64 chars of a-z, 0-9 and single inner hyphens)")
    return mapping

"""Stage `rl-data-prep`: the RL training table, one row per training task, prompts rendered once.

    prepare_rl_data(RLDataPrepConfig(profile="hybrid_slate"), {"bench": bench, "sft_model": model}, out)
    -> out/rl_train.parquet (+ out/rl_data_summary.json beside it)

Each row is one training task of the bench's `train` split (sorted by task id) and freezes what
GRPO must never recompute: the slate in its shuffled order with each skill's category (docs/method.md 2),
the gold skill, the digest of the 16 skill folders the episodes will mount, and the prompt token
ids rendered ONCE with the policy's own tokenizer and chat template (agent.prompts.build_messages,
then render_prompt_ids, add_generation_prompt=True), exactly the ids the episode loop builds.

Prompt variants (the profile decides; `variants` lists the ones present):
- `slate` (`prompt_ids`): the prompt with the 16-skill `<available_skills>` block. Every profile
  except no_skill.
- `no_skill` (`no_skill_prompt_ids`): the same task with no skills section. Profiles no_skill and
  hybrid_slate.
For hybrid_slate one row holds the whole pair (both variants, pair id = task_id), so the pair is
kept or dropped together (docs/method.md 5, pair-atomic); a variant the profile does not use is null.

Columns (rl_train.parquet):
    task_id str, task_path str (relative to the bench), family str, domain str, bench str (the slate's
    seed namespace), slate_seed i64, gold_name str, slate list[struct{name str, category str}],
    skills_snapshot_digest str, task_digest str, profile str, variants list[str],
    prompt_ids list[i32] | null, prompt_len i32 | null,
    no_skill_prompt_ids list[i32] | null, no_skill_prompt_len i32 | null,
    prompt_profile str, prompt_profile_digest str, tool_schema_digest str, tokenizer_digest str,
    max_prompt_tokens i32, skill_aliases str | null
Same inputs and config -> a byte-identical file (rows sorted, fixed schema, skillgate_core.base.parquet_rows'
pyarrow writer: the same bytes with or without polars installed).

Renamed slates (`renamed_rate`): a share of the tasks is played under fresh skill names (skills.aliases:
each distinct first part of the slate's names becomes a pseudo-word no library skill uses and, with
`shuffle_suffixes`, each lookalike group's suffixes are permuted; one name set per task, seeded by the
task id). `slate`, `gold_name` and the snapshot digest stay the bench's (what
rl_tasks checks against skills.json); `skill_aliases` holds {old: new} as JSON and `prompt_ids` are
rendered with the renamed slate; rl_tasks mounts the skill folders renamed the same way. A policy then
cannot recall a training skill by name and has to pick it from the descriptions, as on eval70_v1,
whose skills it has never seen. Verification never depends on skill names.

Refused with an error naming the task: a missing or malformed skills.json (not exactly one oracle,
not 1 + 5/5/5, a slate for another task or oracle, or ordered with the eval shuffle tag), a slate
skill absent from bench/skills, a prompt
longer than `max_prompt_tokens` (default: the model's max_position_embeddings minus
`response_budget_tokens`), a missing bench file or model.
"""

from __future__ import annotations

import json
import random
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgate_core.agent.policies import task_cue
from skillgate_core.agent.prompts import build_messages, get_prompt_profile, render_prompt_ids
from skillgate_core.agent.tool_schemas import tool_schema_digest
from skillgate_core.base.atomic import atomic_write_json
from skillgate_core.base.config_ranges import NonNegativeInt, Probability, check_ranges
from skillgate_core.base.digests import tree_manifest
from skillgate_core.base.safe_paths import UnsafeNameError, check_task_row
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.envs.task_package import TaskPackageError, load_task_package
from skillgate_core.formats.slate_manifest import MANIFEST_FILE, Slate
from skillgate_core.policy.tokenizer_identity import tokenizer_digest
from skillgate_core.rl.profiles import get_profile
from skillgate_core.skills import SlateError, read_slate, snapshot_digest
from skillgate_core.skills.aliases import alias_names, renamed_slate

__all__ = ["OUTPUT_FILE", "SUMMARY_FILE", "RLDataError", "RLDataPrepConfig", "prepare_rl_data", "rl_data_schema"]

OUTPUT_FILE = "rl_train.parquet"
SUMMARY_FILE = "rl_data_summary.json"
TRAIN_SPLIT = "train"
"""The bench split RL trains on; evaluation splits (eval70_v1, slate147) never enter the table."""


class RLDataError(ValueError):
    """The bench or model cannot make a valid RL table; the message names the task (or file) and why."""


@dataclass(frozen=True)
class RLDataPrepConfig:
    """Which tasks, for which profile, rendered with which prompt profile and length limit."""

    profile: str = "selector_clean_oracle_action_credit"
    """RL training profile (docs/method.md 7) the data is for: decides the prompt variants (slate, no_skill)."""
    max_tasks: NonNegativeInt = 0
    """Keep only the first N tasks by task id (0 = all)."""
    prompt_profile: str = "openclaw-v1"
    """Prompt profile (agent.prompts) the prompts are rendered with."""
    max_prompt_tokens: NonNegativeInt = 0
    """Longest prompt allowed, in tokens; 0 = the model's max_position_embeddings - response_budget_tokens."""
    response_budget_tokens: NonNegativeInt = 2048
    """Tokens kept free for the episode's responses when max_prompt_tokens is derived from the model."""
    renamed_rate: Probability = 0.0
    """Share of the tasks whose slate is played under fresh skill names (module docstring; 0: none)."""
    rename_seed: NonNegativeInt = 0
    """Seed of which tasks are renamed and of their names (with the task id)."""
    shuffle_suffixes: bool = True
    """Renamed slates also permute the suffixes within each lookalike group (skills.aliases), so the
    oracle's suffix earns no reward, on any bench (those built before the balanced draws skewed it per
    split). False: only the codename is renamed, as before this option."""

    def __post_init__(self) -> None:
        check_ranges(self)
        get_profile(self.profile)  # UnknownProfileError lists the valid names
        get_prompt_profile(self.prompt_profile)
        if self.max_tasks < 0 or self.max_prompt_tokens < 0 or self.response_budget_tokens < 0:
            raise ValueError("max_tasks, max_prompt_tokens and response_budget_tokens must be >= 0")


def rl_data_schema() -> Any:
    """The parquet schema (a pyarrow schema), in column order. Polars reads it as String, Int64,
    Int32, List(Int32), List(String) and List(Struct{name, category}) columns."""
    import pyarrow as pa

    ids = pa.list_(pa.int32())
    return pa.schema([
        ("task_id", pa.string()), ("task_path", pa.string()), ("family", pa.string()), ("domain", pa.string()),
        ("bench", pa.string()), ("slate_seed", pa.int64()), ("gold_name", pa.string()),
        ("slate", pa.list_(pa.struct([("name", pa.string()), ("category", pa.string())]))),
        ("skills_snapshot_digest", pa.string()), ("task_digest", pa.string()), ("profile", pa.string()),
        ("variants", pa.list_(pa.string())),
        ("prompt_ids", ids), ("prompt_len", pa.int32()),
        ("no_skill_prompt_ids", ids), ("no_skill_prompt_len", pa.int32()),
        ("prompt_profile", pa.string()), ("prompt_profile_digest", pa.string()), ("tool_schema_digest", pa.string()),
        ("tokenizer_digest", pa.string()), ("max_prompt_tokens", pa.int32()), ("skill_aliases", pa.string()),
        ("selection_cue", pa.string()),
    ])


def _bench_rows(bench: Path, split: str) -> list[dict[str, Any]]:
    index = bench / "tasks.jsonl"
    if not index.is_file():
        raise FileNotFoundError(f"{index}: missing; expected a bench built by `skillgate bench build`")
    rows = []
    for n, line in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RLDataError(f"{index}:{n}: not JSON: {exc.msg}") from exc
    for n, r in enumerate(rows, 1):
        missing = [k for k in ("task_id", "split", "path", "family", "domain") if not isinstance(r.get(k), str)]
        if missing:
            raise RLDataError(f"{index}: row {n} ({r.get('task_id', '?')}): missing {', '.join(missing)}")
        try:
            check_task_row(r, source=f"{index} row {n}")  # task_id and path name folders
        except UnsafeNameError as exc:
            raise RLDataError(str(exc)) from None
    chosen = sorted((r for r in rows if r["split"] == split), key=lambda r: r["task_id"])
    if not chosen:
        splits = sorted({str(r.get("split")) for r in rows})
        raise RLDataError(f"{index}: no task in split '{split}'; splits present: {', '.join(splits)}")
    return chosen


class _SkillDigests:
    """File manifests of the bench's skill folders, each scanned once."""

    def __init__(self, library: Path) -> None:
        self.library = library
        self._cache: dict[str, dict[str, str]] = {}  # skill name -> tree_manifest

    def snapshot(self, names: tuple[str, ...], task_id: str) -> str:
        """The digest skills.snapshot_skills would give a snapshot of exactly these skills."""
        files: dict[str, str] = {}
        for name in names:
            if name not in self._cache:
                folder = self.library / name
                if not (folder / "SKILL.md").is_file():
                    raise RLDataError(f"task {task_id}: slate skill {name!r} has no {folder / 'SKILL.md'}")
                self._cache[name] = tree_manifest(folder)
            files.update({f"{name}/{rel}": sha for rel, sha in self._cache[name].items()})
        return snapshot_digest(files)


def _task_slate(bench: Path, row: Mapping[str, Any]) -> Slate:
    task_id = row["task_id"]
    try:
        slate = read_slate(bench / row["path"] / MANIFEST_FILE)
    except SlateError as exc:
        raise RLDataError(f"task {task_id}: malformed slate: {exc}") from exc
    if slate.task_id != task_id:
        raise RLDataError(f"task {task_id}: its {MANIFEST_FILE} is the slate of task {slate.task_id!r}")
    if slate.split != "train":
        raise RLDataError(f"task {task_id}: its slate was ordered with the {slate.split!r} shuffle tag; a training "
                          "task's slate uses the 'train' tag (docs/method.md 2)")
    if row.get("oracle") not in (None, slate.oracle):
        raise RLDataError(f"task {task_id}: tasks.jsonl names oracle {row['oracle']!r}, "
                          f"{MANIFEST_FILE} names {slate.oracle!r}")
    return slate


def _stats(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {}
    ordered = sorted(lengths)
    return {"min": ordered[0], "max": ordered[-1], "mean": round(statistics.fmean(ordered), 1),
            "p50": ordered[len(ordered) // 2], "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]}


def prepare_rl_data(config: RLDataPrepConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Write out_dir/rl_train.parquet (schema: module docstring) and out_dir/rl_data_summary.json."""
    from transformers import AutoConfig, AutoTokenizer

    from skillgate_core.base.parquet_rows import write_rows

    bench, model_dir = Path(inputs["bench"]), Path(inputs["sft_model"])
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir / 'config.json'}: missing; expected the policy's HF model dir")
    profile = get_profile(config.profile)
    prompt_profile = get_prompt_profile(config.prompt_profile)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    limit = config.max_prompt_tokens
    if not limit:
        positions = getattr(AutoConfig.from_pretrained(model_dir), "max_position_embeddings", None)
        if not positions:
            raise RLDataError(f"{model_dir}: config has no max_position_embeddings; set max_prompt_tokens")
        limit = positions - config.response_budget_tokens
        if limit <= 0:
            raise RLDataError(f"{model_dir}: max_position_embeddings {positions} leaves no room for prompts after "
                              f"a response budget of {config.response_budget_tokens} tokens")
    variants = (["slate"] if profile.slate != "none" else []) + (["no_skill"] if profile.slate != "mixed" else [])
    fixed = {"profile": profile.name, "prompt_profile": prompt_profile.name,
             "prompt_profile_digest": prompt_profile.digest(), "tool_schema_digest": tool_schema_digest(),
             "tokenizer_digest": tokenizer_digest(model_dir), "max_prompt_tokens": limit}

    rows = _bench_rows(bench, TRAIN_SPLIT)
    if config.max_tasks:
        rows = rows[: config.max_tasks]
    skills = _SkillDigests(bench / "skills")
    library = sorted(p.name for p in (bench / "skills").iterdir()) if config.renamed_rate else []

    def render(task_id: str, instruction: str, slate: Slate | None, variant: str) -> list[int]:
        ids = render_prompt_ids(tokenizer, build_messages(prompt_profile, instruction, slate))
        if len(ids) > limit:
            raise RLDataError(f"task {task_id}: the {variant} prompt has {len(ids)} tokens, over max_prompt_tokens="
                              f"{limit} (raise rl-data-prep.max_prompt_tokens or use a model with a longer "
                              "context)")
        return ids

    records = []
    for row in rows:
        task_id = row["task_id"]
        slate = _task_slate(bench, row)
        try:
            task = load_task_package(bench / row["path"], within=bench)
        except TaskPackageError as exc:
            raise RLDataError(f"task {task_id}: {exc}") from exc
        aliases = None
        shown = slate
        rng = random.Random(f"rl-renamed::{config.rename_seed}::{task_id}")
        if config.renamed_rate and rng.random() < config.renamed_rate:
            aliases = alias_names(slate.names, rng, taken=library, shuffle_suffixes=config.shuffle_suffixes)
            shown = renamed_slate(slate, aliases)
        prompt = render(task_id, task.instruction, shown, "slate") if "slate" in variants else None
        bare = render(task_id, task.instruction, None, "no_skill") if "no_skill" in variants else None
        records.append({
            "task_id": task_id, "task_path": row["path"], "family": row["family"], "domain": row["domain"],
            "bench": slate.bench, "slate_seed": slate.seed, "gold_name": slate.oracle,
            "slate": [{"name": e.name, "category": e.category} for e in slate.entries],
            "skills_snapshot_digest": skills.snapshot(slate.names, task_id), "task_digest": task.digest,
            "variants": variants,
            "prompt_ids": prompt, "prompt_len": None if prompt is None else len(prompt),
            "no_skill_prompt_ids": bare, "no_skill_prompt_len": None if bare is None else len(bare),
            **fixed,
            "skill_aliases": json.dumps(aliases, sort_keys=True) if aliases else None,
            # the evidence the teacher states before naming the skill (agent.policies.selection_reasoning): the
            # supervised baselines' read turns state the same (sft.baselines)
            "selection_cue": json.dumps(cue, sort_keys=True) if (cue := task_cue(task)) else None,
        })
    target = write_rows(records, out_dir / OUTPUT_FILE, schema=rl_data_schema())

    summary = {
        "tasks": len(records),
        "renamed_tasks": sum(r["skill_aliases"] is not None for r in records),
        "profile": profile.name,
        "variants": variants,
        "families": dict(sorted(Counter(r["family"] for r in records).items())),
        "domains": dict(sorted(Counter(r["domain"] for r in records).items())),
        "max_prompt_tokens": limit,
        "prompt_len": _stats([r["prompt_len"] for r in records if r["prompt_len"] is not None]),
        "no_skill_prompt_len": _stats([r["no_skill_prompt_len"] for r in records
                                       if r["no_skill_prompt_len"] is not None]),
        "prompt_profile": prompt_profile.name,
        "tokenizer_digest": fixed["tokenizer_digest"],
    }
    atomic_write_json(out_dir / SUMMARY_FILE, summary)
    return StageOutput(outputs={"rl_data": target}, metrics=summary)

"""Stage `collect`: teacher trajectories through the real harness (sandboxes, tools, verifier).

For each sampled task of a bench split, the teacher plays `repeats` episodes with the task's frozen
slate. The teacher is the task's reference route played through the harness (`teacher = "reference"`,
with selection noise) or any model behind an OpenAI-compatible endpoint (`teacher = "openai"` with
`teacher_base_url` and `teacher_model`; its text is tokenized once with the base model's tokenizer) (only its 16 skills are mounted at /skills). Every trajectory keeps the exact token stream
(prompt ids, response ids, loss mask), its grade, and its selection actions from span detection
(docs/method.md 4) and its premise facts (credit.premise, docs/method.md 8b), and lands in one parquet file;
summary.json's `premise` holds the premise numbers of every episode played:

    collect_trajectories(CollectConfig(max_tasks=8), {"bench": bench_dir, "base_model": model_dir}, out)
    -> out/trajectories/trajectories.parquet, out/trajectories/summary.json
"""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillgate_core.agent.episode import (  # names, not logic: one imported name a line
    EpisodeConfig,
    EpisodeSpec,
    EpisodeView,
    Policy,
    run_episodes,
)
from skillgate_core.agent.openai_policy import OpenAIPolicy
from skillgate_core.agent.policies import TeacherConfig, TeacherPolicy
from skillgate_core.agent.premise_facts import PREMISE_COLUMN, trajectory_premise
from skillgate_core.agent.trajectory import span_record, trajectory_span_report
from skillgate_core.base.config_ranges import (
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Probability,
    check_ranges,
)
from skillgate_core.base.parquet_rows import write_rows
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.credit.premise import PremiseEpisode, prefixed, summarize_premise
from skillgate_core.envs.backend_registry import Backend
from skillgate_core.envs.backends import reap_orphans
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.policy.endpoint_keys import check_api_key_env, check_key_destination
from skillgate_core.policy.openai_chat import OpenAIEndpoint
from skillgate_core.skills import read_slate, slate_skills_dir
from skillgate_core.skills.aliases import alias_slate

__all__ = ["CollectConfig", "collect_policy", "collect_trajectories"]


@dataclass(frozen=True)
class CollectConfig:
    """Which tasks, how many episodes, and how noisy the teacher is."""

    split: str = "train"
    """Bench split to collect on (train; eval splits are for evaluation only)."""
    max_tasks: NonNegativeInt = 16
    """Tasks to sample from the split (0 = all)."""
    repeats: PositiveInt = 1
    """Episodes per task."""
    misleading_rate: Probability = 0.1
    """Teacher selection noise: probability of reading a misleading skill first."""
    no_read_rate: Probability = 0.0
    """Teacher selection noise: probability of reading no skill."""
    recovery_rate: Probability = 0.0
    """Probability that the reference teacher first reads a misleading skill, then says what in its SKILL.md
    contradicts the instruction and reads the oracle (agent.policies.TeacherConfig.recovery_rate)."""
    teacher_evidence: bool = True
    """The reference teacher's <skill_reasoning> states the instruction's deciding fields before naming the
    skill (agent.policies.selection_reasoning); False: the one-line reason of earlier collections."""
    keep: Literal["all", "resolved"] = "all"
    """Which trajectories to write (SFT later filters on resolved itself)."""
    seed: NonNegativeInt = 0
    """Seed of the task sample and the teacher noise."""
    backend: Backend = "bwrap"
    """Sandbox backend for the episodes: auto or one of envs/backend_registry.py."""
    batch_episodes: PositiveInt = 8
    """Episodes played together in one lockstep batch."""
    sandbox_workers: PositiveInt = 2
    """Threads running the batch's sandboxes at once (starts, tool calls, verification): up to the machine's
    cores. The trajectories do not depend on it (every turn's views reach the teacher together, results come
    back in spec order); only the wall-clock `duration_s` does."""
    max_turns: PositiveInt = 6
    """Turn limit of a teacher episode (the reference teacher needs three)."""
    teacher: Literal["reference", "openai"] = "reference"
    """reference: the task's reference route with selection noise; openai: a model at teacher_base_url."""
    teacher_base_url: str = ""
    """OpenAI-compatible API root of the teacher (teacher = "openai"), e.g. http://127.0.0.1:8000/v1. With
    the key variable set on the worker, its origin must be one the worker lists beside the key
    (PREFIX_BASE_URLS: docs/deploy.md, "Endpoint keys")."""
    teacher_model: str = ""
    """Model name sent to the teacher endpoint."""
    teacher_api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the teacher endpoint's key (unset: no key sent); only
    OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY, whose value, and the base URLs it may go to, are set
    where the worker runs."""
    teacher_temperature: PositiveFloat = 1.0
    """Teacher sampling temperature (teacher = "openai")."""
    teacher_max_new_tokens: PositiveInt = 1024
    """Longest teacher turn (teacher = "openai")."""
    teacher_concurrency: PositiveInt = 8
    """Teacher requests in flight at once (teacher = "openai")."""
    alias_rate: Probability = 0.0
    """Share of episodes played under fresh skill names (skills.aliases: every slate skill renamed, its
    files and description rewritten to match), so a policy imitating them must copy a name out of the
    slate instead of recalling the training skills' names. Each episode's draw and names depend only on
    (seed, task, repeat); the row's `extra` holds {"skill_aliases": {old: new}}."""
    shuffle_suffixes: bool = True
    """Aliased episodes also permute the suffixes within each lookalike group (skills.aliases), so the
    oracle's suffix tells the policy nothing, on any bench (those built before the balanced draws skewed it
    per split). False: only the codename is renamed, as before this option."""

    def __post_init__(self) -> None:
        check_ranges(self)
        check_api_key_env(self.teacher_api_key_env, "teacher_api_key_env")
        if self.teacher == "openai" and not (self.teacher_base_url and self.teacher_model):
            raise ValueError("teacher = \"openai\" needs teacher_base_url and teacher_model")
        if self.teacher == "openai":  # the run names the URL; the worker names where its key may go
            check_key_destination(self.teacher_api_key_env, self.teacher_base_url, "teacher_base_url")
        if self.misleading_rate + self.no_read_rate + self.recovery_rate > 1:
            raise ValueError(f"misleading_rate + no_read_rate + recovery_rate: expected at most 1 (they are "
                             f"exclusive draws), got {self.misleading_rate} + {self.no_read_rate} + "
                             f"{self.recovery_rate}")


def collect_policy(config: CollectConfig, tokenizer) -> Policy:
    """The teacher `config` names: the reference route, or the model at the OpenAI-compatible endpoint."""
    if config.teacher == "reference":
        return TeacherPolicy(tokenizer, TeacherConfig(config.misleading_rate, config.no_read_rate, config.seed,
                                                      config.recovery_rate, config.teacher_evidence))
    endpoint = OpenAIEndpoint(base_url=config.teacher_base_url, model=config.teacher_model,
                              api_key_env=config.teacher_api_key_env, concurrency=config.teacher_concurrency)

    def seed_of(view: EpisodeView) -> int:
        return random.Random(f"teacher:{config.seed}:{view.spec.task.task_id}:{view.spec.repeat}").getrandbits(62)

    return OpenAIPolicy(endpoint, tokenizer, temperature=config.teacher_temperature, top_p=1.0,
                        max_new_tokens=config.teacher_max_new_tokens, seed_of=seed_of,
                        name=f"openai:{config.teacher_model}")


def collect_trajectories(config: CollectConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Play the teacher on sampled tasks; write trajectories.parquet and summary.json."""
    reap_orphans()  # before the model loads: a killed earlier collect's sandboxes go first
    from tqdm import tqdm
    from transformers import AutoTokenizer

    bench = Path(inputs["bench"])
    tokenizer = AutoTokenizer.from_pretrained(inputs["base_model"])
    rows = load_bench_rows(bench, config.split)
    if config.max_tasks:
        rows = sorted(random.Random(config.seed).sample(rows, min(config.max_tasks, len(rows))),
                      key=lambda r: r["task_id"])
    policy = collect_policy(config, tokenizer)
    episode_cfg = EpisodeConfig(max_turns=config.max_turns, backend=config.backend, workers=config.sandbox_workers)
    target = out_dir / "trajectories"
    target.mkdir(parents=True)
    records: list[dict] = []
    premise: list[PremiseEpisode] = []  # every episode played, kept or not: the premise is about the episodes
    aliases: dict[tuple[str, int], dict[str, str]] = {}
    library_names: list[str] | None = None
    with tempfile.TemporaryDirectory(prefix="skillgate-collect-") as scratch:
        specs = []
        for row in rows:
            task = load_task_package(bench / row["path"], within=bench)
            slate = read_slate(bench / row["path"] / MANIFEST_FILE)
            skills = slate_skills_dir(bench / "skills", slate.names, Path(scratch) / row["task_id"])
            for r in range(config.repeats):
                rng = random.Random(f"collect-alias::{config.seed}::{row['task_id']}::{r}")
                if config.alias_rate and rng.random() < config.alias_rate:
                    if library_names is None:
                        library_names = sorted(p.name for p in (bench / "skills").iterdir())
                    aliased, folder = alias_slate(slate, skills, Path(scratch) / row["task_id"] / f"alias-{r}", rng,
                                                  taken=library_names, shuffle_suffixes=config.shuffle_suffixes)
                    aliases[(row["task_id"], r)] = {o: n for o, n in zip(slate.names, aliased.names, strict=True)}
                    specs.append(EpisodeSpec(task, aliased, folder, bench=row["family"], repeat=r))
                else:
                    specs.append(EpisodeSpec(task, slate, skills, bench=row["family"], repeat=r))
        with tqdm(total=len(specs), desc="collect", unit="episode") as bar:
            for start in range(0, len(specs), config.batch_episodes):
                batch = specs[start : start + config.batch_episodes]
                for traj in run_episodes(batch, policy, tokenizer, episode_cfg):
                    report = trajectory_span_report(traj, tokenizer)
                    spans = span_record(report)
                    facts = trajectory_premise(traj, tokenizer, report)
                    premise.append(facts)
                    row = traj.to_row()
                    row.update(reads=spans["reads"], spans=json.dumps(spans), split=config.split,
                               **{PREMISE_COLUMN: json.dumps(facts.as_record(), sort_keys=True)})
                    renamed = aliases.get((row["task_id"], row["repeat"]))
                    if renamed is not None:
                        row["extra"] = json.dumps({**json.loads(row["extra"]), "skill_aliases": renamed}, sort_keys=True)
                    records.append(row)
                bar.update(len(batch))
    kept = [r for r in records if config.keep == "all" or r["score"] >= 1.0]
    write_rows(kept, target / "trajectories.parquet")  # schema inferred from the rows, as before
    statuses = Counter(r["status"] for r in records)
    first_reads = Counter(r["reads"][0] if r["reads"] else "none" for r in records)
    summary = {
        "episodes": len(records),
        "kept": len(kept),
        "resolved_rate": sum(r["score"] >= 1.0 for r in records) / max(1, len(records)),
        "statuses": dict(statuses),
        "first_read": dict(first_reads),
        "span_mismatches": sum(json.loads(r["spans"])["span_mismatch"] for r in records),
        "aliased_episodes": len(aliases),
        "teacher": config.teacher if config.teacher == "reference" else f"openai:{config.teacher_model}",
        "premise": summarize_premise(premise),
    }
    if isinstance(policy, OpenAIPolicy):
        summary["teacher_usage"] = dict(policy.usage)
    (target / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    # stage metrics: the premise numbers flat (premise/KEY), so each is a scalar row in the UI and the warehouse
    metrics = {k: v for k, v in summary.items() if k != "premise"}
    return StageOutput(outputs={"trajectories": target}, metrics={**metrics, **prefixed(summary["premise"])})

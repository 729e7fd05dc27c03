"""The SkillGym builder/reviewer loop: turn a real skill into verifiable task packages.

    records = generate_from_skill(Path("skills/pdf-merge"), client, Path("out"), SkillGymConfig())

Per reasoning structure:
  1. fit-check: the model says whether the skill can support the structure; if not -> skipped.
  2. builder: the model writes the package (JSON {"files": ...}).
  3. static checks (checks.py), then the validity gate (no-op scores 0, solve.sh scores 1, twice,
     in real sandboxes) -> problems go back to the builder.
  4. quality review: leaks, too strict, too weak -> blocking issues go back to the builder.
  Steps 2-4 repeat for up to 1 + max_repairs rounds. A package that passes everything goes to
  out/accepted/ID; one that never does goes to out/unresolved/ID with reason.json (kept apart, never
  mixed into the accepted set). Each structure appends one BuildRecord to out/records.jsonl with
  every call's tokens and the cost at the configured prices.

The skill itself is copied to out/skills/NAME and checked byte-identical to the input (tasks mount
that library at /skills).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillgate_core.base.config_ranges import NonNegativeFloat, NonNegativeInt, PositiveInt, check_ranges
from skillgate_core.base.digests import path_sha256
from skillgate_core.base.plain_trees import copy_plain_tree
from skillgate_core.base.safe_paths import UnsafeNameError, write_files_inside
from skillgate_core.benchgen.skillgym.checks import static_problems
from skillgate_core.benchgen.skillgym.client import ChatClient
from skillgate_core.benchgen.skillgym.prompts import STRUCTURES, build_messages, fit_messages, review_messages
from skillgate_core.benchgen.skillgym.protocol import ReplyError, parse_build, parse_fit, parse_review
from skillgate_core.benchgen.skillgym.records import BuildRecord, CallRecord, Verdict
from skillgate_core.envs.backend_registry import Backend
from skillgate_core.policy.openai_chat import EndpointError

__all__ = ["GateFn", "SkillGymConfig", "generate_from_skill"]

GateFn = Callable[[Path], tuple[bool, str]]
"""(package folder) -> (valid, why not): the validity gate; tests may pass a stricter or a fake one."""


@dataclass(frozen=True)
class SkillGymConfig:
    """How the loop runs."""

    structures: tuple[str, ...] = tuple(STRUCTURES)
    """Reasoning structures to try for each skill."""
    max_repairs: NonNegativeInt = 5
    """Repair rounds after the first build (SkillGym: up to 5)."""
    price_in_per_mtok: NonNegativeFloat = 0.0
    """USD per million prompt tokens (0: cost not tracked)."""
    price_out_per_mtok: NonNegativeFloat = 0.0
    """USD per million completion tokens."""
    gate_backend: Backend = "bwrap"
    """Sandbox backend of the validity gate."""
    gate_repeats: PositiveInt = 2
    """Runs per gate agent."""

    def __post_init__(self) -> None:
        check_ranges(self)
        unknown = [s for s in self.structures if s not in STRUCTURES]
        if unknown:
            raise ValueError(f"structures: expected some of {sorted(STRUCTURES)}, got {unknown}")


def validity_gate(backend: Backend, repeats: int) -> GateFn:
    """The envs validity gate as a GateFn."""
    from skillgate_core.envs.validity_gate import check_task

    def gate(folder: Path) -> tuple[bool, str]:
        report = check_task(folder, backend=backend, repeats=repeats)
        if report.valid:
            return True, ""
        details = "; ".join(dict.fromkeys(t.detail for t in report.trials if t.detail))
        return False, f"validity gate: {report.verdict}" + (f" ({report.error or details})" if report.error or details else "")

    return gate


def oracle_only_slate(task_id: str, skill: str, description: str) -> dict:
    """The skills.json of a generated task: a one-entry slate holding its oracle skill.

    A SkillGym task is built around one skill; composing its 16-skill slate (misleading, relevant,
    irrelevant) is a later step (skills.build_slate). Until then the manifest is well-formed but not
    a training slate, and rl-data-prep refuses it by name."""
    from skillgate_core.skills import Slate, SlateEntry, slate_seed

    slate = Slate(task_id=task_id, bench="skillgym", split="train", seed=slate_seed("skillgym", task_id, "train"),
                  entries=(SlateEntry(skill, "oracle", description),))
    return slate.to_manifest()


def _write(folder: Path, files: dict[str, str], skill: str, description: str) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    # Paths from the endpoint: checked (parse_build did too) and written without following a link.
    write_files_inside(folder, files, source=f"builder reply for {folder.name}",
                       executable=lambda rel: rel.endswith(".sh"))
    if "skills.json" not in files:
        manifest = oracle_only_slate(folder.name, skill, description)
        (folder / "skills.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _cost(calls: Sequence[CallRecord], config: SkillGymConfig) -> float:
    prompt = sum(c.prompt_tokens for c in calls)
    completion = sum(c.completion_tokens for c in calls)
    return round((prompt * config.price_in_per_mtok + completion * config.price_out_per_mtok) / 1e6, 6)


def _copy_skill(skill_dir: Path, out: Path) -> Path:
    target = out / "skills" / skill_dir.name
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # load_skill refused links (the folder itself included); one that came since is refused, never followed
    copy_plain_tree(skill_dir, target)
    if path_sha256(target) != path_sha256(skill_dir):
        raise RuntimeError(f"{target}: the copied skill differs from {skill_dir}")
    return target


def generate_from_skill(skill_dir: Path, client: ChatClient, out: Path, config: SkillGymConfig | None = None,
                        gate: GateFn | None = None) -> list[BuildRecord]:
    """Run the loop for every configured structure of the skill at `skill_dir`; append to out/records.jsonl."""
    from skillgate_core.skills import load_skill

    config = config or SkillGymConfig()
    run_gate = gate or validity_gate(config.gate_backend, config.gate_repeats)
    skill = load_skill(skill_dir)
    skill_md = skill.skill_md.read_text(encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    _copy_skill(skill.folder, out)
    records = [_one_structure(skill.name, skill.description, skill_md, structure, client, out, config, run_gate)
               for structure in config.structures]
    with (out / "records.jsonl").open("a", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record.to_json(), sort_keys=True) + "\n")
    return records


def _one_structure(name: str, description: str, skill_md: str, structure: str, client: ChatClient, out: Path,
                   config: SkillGymConfig, gate: GateFn) -> BuildRecord:
    task_id = f"{name}-{structure}"
    calls: list[CallRecord] = []

    def ask(role: str, round_: int, messages: list[dict[str, str]]) -> str:
        reply = client.chat(messages)
        calls.append(CallRecord(role, round_, reply.prompt_tokens, reply.completion_tokens, round(reply.seconds, 3)))
        return reply.text

    def record(verdict: Verdict, reason: str, rounds: int, path: str, history: list[str], **extra: object) -> BuildRecord:
        return BuildRecord(name, structure, task_id, verdict, reason, rounds, path, tuple(calls), tuple(history),
                           _cost(calls, config), extra)

    try:
        fit = parse_fit(ask("fit-check", 0, fit_messages(name, skill_md, structure)))
    except (EndpointError, ReplyError) as exc:
        return record("unresolved", f"fit-check failed: {exc}", 0, "", [])
    if not fit.fit:
        return record("skipped", f"fit-check: {fit.reason}", 0, "", [])

    work = out / "work" / task_id
    files: dict[str, str] | None = None
    feedback: list[str] = []
    history: list[str] = []
    rounds = 0
    for rounds in range(1, config.max_repairs + 2):
        try:
            files = parse_build(ask("builder", rounds, build_messages(name, skill_md, structure, files, feedback)))
        except ReplyError as exc:
            feedback = [str(exc)]
            history.append(f"round {rounds}: {exc}")
            continue
        except EndpointError as exc:
            return record("unresolved", f"builder call failed: {exc}", rounds, "", history)
        feedback = static_problems(files, name)
        if not feedback:
            try:
                _write(work, files, name, description)
            except UnsafeNameError as exc:  # e.g. 'a' and 'a/b' both named: back to the builder
                feedback = [str(exc)]
        if not feedback:
            valid, why = gate(work)
            feedback = [] if valid else [why]
        if not feedback:
            try:
                review = parse_review(ask("reviewer", rounds, review_messages(name, skill_md, structure, files)))
            except (EndpointError, ReplyError) as exc:
                feedback = [f"review failed: {exc}"]
            else:
                feedback = [f"{kind}: {detail}" for kind, detail in review.issues] if not review.passed else []
                if not review.passed and not feedback:
                    feedback = ["reviewer: blockingPass is false without issues"]
        if not feedback:
            target = out / "accepted" / task_id
            _move(work, target)
            return record("accepted", "", rounds, str(target), history)
        history.append(f"round {rounds}: " + " | ".join(feedback))
    target = out / "unresolved" / task_id
    if files is not None:
        try:
            _write(target, files, name, description)
        except UnsafeNameError as exc:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            history.append(f"kept without its files: {exc}")
        reason = history[-1] if history else "no package"
        (target / "reason.json").write_text(json.dumps({"reason": reason, "history": history}, indent=2) + "\n",
                                            encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return record("unresolved", history[-1] if history else "no package", rounds,
                  str(target) if files is not None else "", history)


def _move(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), dst)

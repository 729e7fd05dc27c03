"""Protocol spec files and the protocol they give on a bench (docs/method.md 8).

A spec file (evaluation/specs/NAME.toml, or any path) fixes what a protocol is *made of*: the bench
split, the skill mode, repeats, seed, sampling, context size, episode limits, sandbox mode and prompt
profile. `build_protocol(spec, bench)` reads the bench and fingerprints the concrete protocol: the
ordered task list with each task package's content digest, the digest of the skill snapshot the
slates draw from, the slate manifests, the prompt profile and tool schema digests, plus every spec
value. A bench holding fewer tasks than the spec's nominal count (the demo bench's 16-task slate)
gives a protocol over what it holds; the task count and list are part of the fingerprint.

    spec = load_spec("eval70_v1")                          # the shipped file, or a path to one
    resolved = build_protocol(spec, bench_dir)             # ResolvedProtocol
    resolved.protocol.protocol_id()                        # 'eval70_v1__mixed__r4__1f0c9a7e2b'
    build_protocol(spec, bench_dir, demo_repeats=1)        # explicit demo override: another protocol
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillgate_core.agent.prompts import PromptProfile, get_prompt_profile
from skillgate_core.agent.tool_schemas import tool_schema_digest
from skillgate_core.base.config import ConfigError, canonical_json, config_from_mapping
from skillgate_core.base.config_ranges import (
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Probability,
    check_ranges,
)
from skillgate_core.base.digests import file_sha256, path_sha256
from skillgate_core.base.plain_trees import check_plain_tree, check_real_folder
from skillgate_core.envs.backend_registry import UsableBackend
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.evaluation.protocol import EvalProtocol
from skillgate_core.formats.slate_manifest import MANIFEST_FILE
from skillgate_core.skills import Slate, read_slate, snapshot_digest

__all__ = ["SPECS_DIR", "ProtocolSpec", "ProtocolTask", "ResolvedProtocol", "build_protocol", "list_specs",
           "load_spec", "spec_path"]

SPECS_DIR = Path(__file__).resolve().parent / "specs"
"""The shipped protocol spec files (eval70_v1.toml, slate147.toml)."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class ProtocolSpec:
    """What a protocol is made of (a spec file's [protocol] table)."""

    spec_id: str
    """Protocol family, the first part of the protocol id (eval70_v1, slate147)."""
    split: str
    """Bench split whose tasks it runs."""
    description: str = ""
    """One line for listings."""
    nominal_tasks: NonNegativeInt = 0
    """Tasks the full protocol has (70, 147); a bench holding fewer gives a protocol over what it holds."""
    max_tasks: NonNegativeInt = 0
    """Use only the first N tasks of the split, by task id (0 = all): for tiny test protocols."""
    skill_mode: Literal["mixed", "none", "oracle"] = "mixed"
    """Skills shown: the task's 16-skill slate, none, or only its oracle."""
    repeats: PositiveInt = 4
    """Trials per task."""
    seed: NonNegativeInt = 0
    """Protocol sampling seed (each trial derives its own from it)."""
    temperature: PositiveFloat = 1.0
    """Sampling temperature."""
    top_p: Probability = 1.0
    """Nucleus mass (1.0 = off)."""
    max_new_tokens: PositiveInt = 1024
    """Longest assistant turn."""
    context_size: PositiveInt = 16384
    """Prompt + response tokens per episode."""
    max_turns: PositiveInt = 30
    """Assistant turns per episode."""
    wall_clock_s: PositiveFloat = 850.0
    """Seconds per episode."""
    backend: UsableBackend = "bwrap"
    """Sandbox backend (part of the identity: comparison hygiene)."""
    prompt_profile: str = "openclaw-v1"
    """Prompt profile name (agent/prompts.py); its digest enters the fingerprint."""
    stepped: bool = False
    """The bench must have stepped procedures (bench-build procedure_steps K >= 1: the agent carries out each
    skill's K steps itself, docs/benchmarks.md); a bench without them is refused. Each bench's K gives its
    own fingerprint (its task and skill digests), so rows of two K levels are never mixed in one table."""
    source: str = field(default="", compare=False)
    """The file it was read from (not part of the identity)."""

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.top_p <= 0:
            raise ValueError(f"top_p must be > 0, got {self.top_p}")


@dataclass(frozen=True)
class ProtocolTask:
    """One task of a resolved protocol."""

    task_id: str
    """The task."""
    benchmark: str
    """Its family."""
    path: Path
    """The task package folder."""
    slate: Slate | None
    """The skills shown (per skill mode); None for skill mode none."""


@dataclass(frozen=True)
class ResolvedProtocol:
    """A spec made concrete on one bench."""

    protocol: EvalProtocol
    """The fingerprinted protocol."""
    spec: ProtocolSpec
    """The spec it came from."""
    bench: Path
    """The bench folder."""
    tasks: tuple[ProtocolTask, ...]
    """Its tasks, in protocol order."""
    skill_names: tuple[str, ...]
    """Every skill any slate shows (sorted): what the frozen snapshot holds."""
    demo: dict[str, Any]
    """Explicit overrides of the spec ({"repeats": 1} for a demo run), {} for the protocol as specified."""

    @property
    def profile(self) -> PromptProfile:
        return get_prompt_profile(self.spec.prompt_profile)

    def trial_count(self) -> int:
        return len(self.tasks) * self.protocol.repeats

    def note(self) -> str:
        """What differs from the nominal protocol, in words ('' when nothing does)."""
        parts = []
        if self.spec.nominal_tasks and len(self.tasks) != self.spec.nominal_tasks:
            parts.append(f"the bench holds {len(self.tasks)} of the {self.spec.nominal_tasks} {self.spec.split} tasks")
        if self.demo:
            parts.append("demo override " + ", ".join(f"{k}={v}" for k, v in sorted(self.demo.items())))
        return "; ".join(parts)


def list_specs() -> list[str]:
    """Names of the shipped spec files."""
    return sorted(p.stem for p in SPECS_DIR.glob("*.toml"))


def spec_path(name_or_path: str | Path) -> Path:
    """The file `load_spec(name_or_path)` reads: a shipped spec's, or the .toml file named."""
    text = str(name_or_path)
    return Path(text) if (text.endswith(".toml") or Path(text).is_file()) else SPECS_DIR / f"{text}.toml"


def load_spec(name_or_path: str | Path) -> ProtocolSpec:
    """A spec by shipped name (eval70_v1, slate147) or by path to a .toml file."""
    text = str(name_or_path)
    path = spec_path(text)
    if not path.is_file():
        raise ConfigError(f"no protocol spec '{text}' ({path} missing); shipped: {', '.join(list_specs())}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("protocol")
    if not isinstance(table, dict) or set(data) != {"protocol"}:
        raise ConfigError(f"{path}: expected exactly one [protocol] table")
    spec = config_from_mapping(ProtocolSpec, table, str(path), prefix="protocol.")
    get_prompt_profile(spec.prompt_profile)  # unknown names fail here, with the known ones listed
    return ProtocolSpec(**{**spec.__dict__, "source": str(path)})


def _sha(data: object) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def _shown_slate(slate: Slate, mode: str) -> Slate | None:
    if mode == "none":
        return None
    if mode == "oracle":
        return Slate(task_id=slate.task_id, bench=slate.bench, split=slate.split, seed=slate.seed,
                     entries=tuple(e for e in slate.entries if e.category == "oracle"))
    return slate


def bench_procedure_steps(bench: Path) -> int:
    """The procedure_steps K a bench was built with (its suite.json config; 0 for a bench from before the
    option, or one without suite.json, e.g. imported Harbor tasks)."""
    import json

    manifest = Path(bench) / "suite.json"
    if not manifest.is_file():
        return 0
    try:
        return int(json.loads(manifest.read_text(encoding="utf-8")).get("config", {}).get("procedure_steps", 0))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{manifest}: config.procedure_steps: expected an integer ({exc})") from None


def build_protocol(spec: ProtocolSpec, bench: str | Path, *, demo_repeats: int = 0) -> ResolvedProtocol:
    """The protocol `spec` gives on `bench` (see the module docstring).

    `demo_repeats` > 0 is the explicit demo override of the repeats: the protocol id and fingerprint
    change with it, and `ResolvedProtocol.demo` records it.
    """
    bench = Path(bench).resolve()
    if spec.stepped and bench_procedure_steps(bench) < 1:
        raise ValueError(f"protocol {spec.spec_id}: needs a bench with stepped procedures (bench-build "
                         f"procedure_steps >= 1); {bench} was built with procedure_steps "
                         f"{bench_procedure_steps(bench)}")
    rows = load_bench_rows(bench, spec.split)
    if spec.max_tasks:
        rows = rows[: spec.max_tasks]
    tasks: list[ProtocolTask] = []
    listing, manifests = [], []
    for row in rows:
        folder = bench / row["path"]
        check_real_folder(folder, below=bench)  # a task reached through a link would be a host folder
        slate = read_slate(folder / MANIFEST_FILE)
        tasks.append(ProtocolTask(row["task_id"], row["family"], folder, _shown_slate(slate, spec.skill_mode)))
        listing.append([row["task_id"], row["family"], path_sha256(folder)])
        manifests.append(file_sha256(folder / MANIFEST_FILE))
    names = sorted({e.name for t in tasks if t.slate for e in t.slate.entries})
    files: dict[str, str] = {}
    for name in names:
        skill_dir = bench / "skills" / name
        if not skill_dir.is_dir():
            raise FileNotFoundError(f"{skill_dir}: skill '{name}' shown by a slate is not in the bench")
        # NotPlainTree naming a link at any level (skills/, the skill folder, inside): the snapshot refuses it
        # too, and its digest must never be a host folder's
        check_plain_tree(skill_dir, below=bench)
        for path in sorted(skill_dir.rglob("*")):
            if path.is_file():
                files[f"{name}/{path.relative_to(skill_dir).as_posix()}"] = file_sha256(path)
    if demo_repeats < 0:
        raise ValueError(f"demo_repeats must be >= 0, got {demo_repeats}")
    demo = {"repeats": demo_repeats} if demo_repeats and demo_repeats != spec.repeats else {}
    protocol = EvalProtocol(
        spec_id=spec.spec_id, skill_mode=spec.skill_mode, repeats=demo_repeats or spec.repeats,
        task_list_sha256=_sha(listing), snapshot_digest=snapshot_digest(files),
        manifest_sha256=_sha(manifests if spec.skill_mode != "none" else []),
        prompt_profile_digest=get_prompt_profile(spec.prompt_profile).digest(),
        tool_schema_digest=tool_schema_digest(), seed=spec.seed, temperature=spec.temperature, top_p=spec.top_p,
        max_new_tokens=spec.max_new_tokens, context_size=spec.context_size, split=spec.split, tasks=len(tasks),
        max_turns=spec.max_turns, wall_clock_s=spec.wall_clock_s, backend=spec.backend,
    )
    return ResolvedProtocol(protocol, spec, bench, tuple(tasks), tuple(names), demo)

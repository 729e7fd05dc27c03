"""Slates: the 16 skills a task's prompt advertises, in a seeded order (docs/method.md 1-2).

    slate = build_slate(task_id="t1", bench="procedural", split="train", instruction=text,
                        oracle="gold", misleading=[...5 names...], retriever=retriever)
    write_slate(slate, "task/skills.json"); slate == read_slate("task/skills.json")

Composition: the task's oracle (gold) skill, its 5 given misleading skills, 5 relevant skills (the
top-5 BM25 neighbours of the instruction, oracle and misleading excluded) and 5 irrelevant skills
drawn (seeded) from outside that same ranking's top-50. Order: `random.Random(seed).shuffle` of
[oracle, misleading x5, relevant x5, irrelevant x5] with seed = `slate_seed(bench, task_id, split)`.
The order is part of the data row: read it back from skills.json, never recompute it.

The skills.json format itself (Slate, SlateEntry, their parser) lives in skillgate_core.formats.slate_manifest,
below both skills and envs, so task packages and slates share one parser; it is re-exported here.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from skillgate_core.base.atomic import atomic_write_json
from skillgate_core.base.plain_trees import NotPlainTree, copy_plain_tree
from skillgate_core.formats.slate_manifest import (
    Slate,
    SlateCategory,
    SlateEntry,
    SlateError,
    Split,
    load_slate_manifest,
    skill_location,
)
from skillgate_core.skills.retrieval import SkillRetriever
from skillgate_core.skills.slate_shape import SLATE_SHAPE, slate_shape_problem

__all__ = [
    "IRRELEVANT_OUTSIDE_TOP",
    "SHUFFLE_TAGS",
    "Slate",
    "SlateCategory",
    "SlateEntry",
    "SlateError",
    "Split",
    "build_slate",
    "read_slate",
    "skill_location",
    "slate_skills_dir",
    "slate_problem",
    "slate_seed",
    "write_slate",
]

SHUFFLE_TAGS: dict[str, str] = {"train": "slate-train-shuffle", "eval": "slate-shuffle"}
"""Seed tag per split (docs/method.md 2): training and evaluation slates of one task order differently."""
IRRELEVANT_TAG = "slate-irrelevant"
"""Seed tag of the irrelevant draw; split-free, so a task's members are the same in both splits."""
IRRELEVANT_OUTSIDE_TOP = 50
"""Irrelevant skills are drawn from outside this many best-ranked skills."""


def _tag_seed(tag: str, bench: str, task_id: str) -> int:
    return int(hashlib.sha256(f"{tag}::{bench}::{task_id}".encode()).hexdigest()[:12], 16)


def slate_seed(bench: str, task_id: str, split: Split) -> int:
    """int(first 12 hex of sha256("TAG::BENCH::TASK_ID"), 16); TAG per `SHUFFLE_TAGS[split]`."""
    if split not in SHUFFLE_TAGS:
        raise SlateError(f"split: expected one of {sorted(SHUFFLE_TAGS)}, got {split!r}")
    return _tag_seed(SHUFFLE_TAGS[split], bench, task_id)


def slate_problem(slate: Slate | Iterable[SlateEntry]) -> str | None:
    """None if the slate is 16 unique names with exactly one oracle and 5/5/5, else why not.

    The same rule (`slate_shape.slate_shape_problem`) that rejects a group in training.
    """
    entries = slate.entries if isinstance(slate, Slate) else tuple(slate)
    return slate_shape_problem([(e.name, e.category) for e in entries])


def build_slate(
    *,
    task_id: str,
    bench: str,
    split: Split,
    instruction: str,
    oracle: str,
    misleading: Sequence[str],
    retriever: SkillRetriever,
    irrelevant_outside_top: int = IRRELEVANT_OUTSIDE_TOP,
) -> Slate:
    """The task's slate; every name must be in the retriever's library (for its description).

    Raises SlateError when the given skills are wrong (unknown, repeated, not 5 misleading) or the
    library is too small for 5 relevant skills and 5 irrelevant ones outside the top
    `irrelevant_outside_top`.
    """
    n_misleading, n_relevant, n_irrelevant = (SLATE_SHAPE[k] for k in ("misleading", "relevant", "irrelevant"))
    given = [oracle, *misleading]
    unknown = [n for n in given if n not in retriever.descriptions]
    if unknown:
        raise SlateError(f"{bench}/{task_id}: skills not in the library: {unknown}")
    if len(misleading) != n_misleading or len(set(given)) != len(given):
        raise SlateError(
            f"{bench}/{task_id}: expected {n_misleading} distinct misleading skills other than the oracle "
            f"{oracle!r}, got {list(misleading)}"
        )
    ranking = [r.name for r in retriever.rank(instruction, exclude=set(given))]
    relevant = ranking[:n_relevant]
    # Sorted by name so that the draw depends only on which skills are far, not on their scores.
    pool = sorted(ranking[max(irrelevant_outside_top, n_relevant):])
    if len(relevant) < n_relevant or len(pool) < n_irrelevant:
        raise SlateError(
            f"{bench}/{task_id}: library of {len(retriever.names)} skills is too small: need {n_relevant} "
            f"relevant and {n_irrelevant} irrelevant outside the top {irrelevant_outside_top}, "
            f"found {len(relevant)} and {len(pool)}"
        )
    irrelevant = random.Random(_tag_seed(IRRELEVANT_TAG, bench, task_id)).sample(pool, n_irrelevant)
    members: list[tuple[str, SlateCategory]] = [(oracle, "oracle")]
    members += [(n, "misleading") for n in misleading]
    members += [(n, "relevant") for n in relevant]
    members += [(n, "irrelevant") for n in irrelevant]
    seed = slate_seed(bench, task_id, split)
    random.Random(seed).shuffle(members)
    entries = tuple(SlateEntry(n, c, retriever.descriptions[n]) for n, c in members)
    slate = Slate(task_id=task_id, bench=bench, split=split, seed=seed, entries=entries)
    problem = slate_problem(slate)
    if problem is not None:  # unreachable by construction; a guard against a changed SLATE_SHAPE
        raise SlateError(f"{bench}/{task_id}: {problem}")
    return slate


def write_slate(slate: Slate, path: str | Path) -> Path:
    """Write the skills.json manifest atomically; a malformed slate is refused."""
    problem = slate_problem(slate)
    if problem is not None:
        raise SlateError(f"{slate.bench}/{slate.task_id}: refusing to write a malformed slate: {problem}")
    return atomic_write_json(path, slate.to_manifest())


def read_slate(path: str | Path) -> Slate:
    """Read a skills.json manifest and check the 16-skill shape; SlateError names the file when it is
    malformed (missing, not JSON, a bad key or entry, not exactly one oracle, not 1 + 5/5/5)."""
    slate = load_slate_manifest(path)
    problem = slate_problem(slate)
    if problem is not None:
        raise SlateError(f"{path}: {problem}")
    return slate


def slate_skills_dir(library: Path, names: Iterable[str], into: Path) -> Path:
    """A folder holding only these skills of a library folder: what /skills shows in an episode.

    A symbolic link at any level is refused (SlateError naming it), never copied through: the library
    folder itself (a bench's `skills/`), a skill folder, anything inside one. The copy would otherwise
    carry the link's target, any host file, into the sandbox (copytree once followed a linked skill
    folder at the top: only links inside were refused). FIFOs, sockets and devices are refused too.
    Each skill is copied beside its place and renamed in, so a refused one leaves nothing behind."""
    into.mkdir(parents=True, exist_ok=True)
    library = Path(library)
    for name in names:
        target = into / name
        if target.exists():
            continue
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=into))
        try:
            # below = the library's parent: the library folder itself is checked as well as what it holds
            copy_plain_tree(library / name, staging / name, below=library.parent)
            (staging / name).rename(target)
        except NotPlainTree as exc:
            raise SlateError(f"{exc} (skillgate skills check names every one)") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return into

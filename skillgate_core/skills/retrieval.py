"""BM25 retrieval of skills for a task text (rank_bm25.BM25Okapi; we do not rank ourselves).

    retriever = build_retriever(load_library("skills/"))          # or build_retriever(read_index(p))
    top = retriever.top_k(instruction, k=5, exclude={"gold-skill"})
    [(r.name, r.score) for r in top]

A skill's document is its name (hyphens as spaces) plus its description, and optionally its body.
Tokens are lowercase runs of [a-z0-9]. Ties (equal scores, e.g. no shared word at all) are broken
by name, so a ranking is the same in every process and for every input order of the library.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from skillgate_core.skills.skill_md import Skill

if TYPE_CHECKING:
    import polars as pl
    from typing_extensions import TypeIs

__all__ = ["RankedSkill", "SkillRetriever", "build_retriever", "tokenize"]

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric runs: `PDF-merge, v2` -> ['pdf', 'merge', 'v2']."""
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True)
class RankedSkill:
    """One retrieved skill."""

    name: str
    """The skill name."""
    score: float
    """Its BM25 score for the query (higher is more similar)."""


@dataclass(frozen=True)
class SkillRetriever:
    """A BM25 index over a library's skills; build it with `build_retriever`."""

    names: tuple[str, ...]
    """Skill names in corpus order (sorted), so scores do not depend on the input order."""
    descriptions: Mapping[str, str] = field(hash=False, repr=False)
    """name -> description, for the slate entries built from a ranking."""
    include_body: bool
    """True when the documents include the SKILL.md bodies."""
    bm25: Any = field(hash=False, compare=False, repr=False)
    """The rank_bm25 model over the tokenized documents."""

    def rank(self, query: str, exclude: Collection[str] = ()) -> list[RankedSkill]:
        """Every skill not in `exclude`, best first; equal scores in name order."""
        # Words absent from the corpus score 0 for every document; dropping them first keeps long
        # instructions cheap (rank_bm25 scans the whole corpus once per query word).
        words = [w for w in tokenize(query) if w in self.bm25.idf]
        scores = self.bm25.get_scores(words) if words else [0.0] * len(self.names)
        ranked = [
            RankedSkill(name, float(score))
            for name, score in zip(self.names, scores, strict=True)
            if name not in exclude
        ]
        ranked.sort(key=lambda r: (-r.score, r.name))
        return ranked

    def top_k(self, query: str, k: int, exclude: Collection[str] = ()) -> list[RankedSkill]:
        """The `k` best skills for `query`, skipping `exclude` (fewer when the library is smaller)."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        return self.rank(query, exclude)[:k]


def _bm25(corpus: list[list[str]]) -> Any:
    # Imported here: the training path (rollouts on the GPU machine) loads skills but never ranks them.
    from rank_bm25 import BM25Okapi

    return BM25Okapi(corpus)


def _is_index_frame(library: object) -> TypeIs[pl.DataFrame]:
    return type(library).__module__.startswith("polars")  # polars is imported only by the index's maker


def build_retriever(library: Iterable[Skill] | pl.DataFrame, include_body: bool = False) -> SkillRetriever:
    """A retriever over `library`: Skill objects (`load_library`) or an index frame (`read_index`).

    `include_body` adds each SKILL.md body to its document; an index holds no bodies, so it needs
    Skill objects.
    """
    if _is_index_frame(library):
        if include_body:
            raise ValueError("include_body needs Skill objects (load_library); an index holds no bodies")
        rows = [(r["name"], r["description"], "") for r in library.iter_rows(named=True)]
    else:
        rows = [(s.name, s.description, s.body if include_body else "") for s in library]
    entries: dict[str, tuple[str, str]] = {}
    for name, description, body in rows:
        if name in entries:
            raise ValueError(f"duplicate skill name {name!r} in the retrieval library")
        entries[name] = (description, body)
    if not entries:
        raise ValueError("cannot build a retriever over an empty skill library")
    names = tuple(sorted(entries))
    corpus = [
        tokenize(f"{name.replace('-', ' ')} {entries[name][0]} {entries[name][1]}") for name in names
    ]
    return SkillRetriever(
        names=names,
        descriptions=MappingProxyType({n: entries[n][0] for n in names}),
        include_body=include_body,
        bm25=_bm25(corpus),
    )

"""The shortcut predictors the bench audit fits: each sees a task's skill names alone, or its slate positions
alone, and picks the oracle.

    task = AuditTask(task_id, split, family, domain, oracle, names)   # names: the slate in prompt order
    PREDICTORS["name.family_suffix"].choice(task)                  # -> choice_model.Choice

A skill name is `<codename>-<noun>-<suffix>`, and an oracle shares codename and noun with its five
lookalikes (its cluster, `skills.aliases.lookalike_groups`), so within the cluster only the suffix tells
names apart: every feature of a name there (its length, its n-grams) is the cluster's constant part plus
a feature of the suffix. Three kinds of predictor:

- `name.*`, candidates the oracle's cluster (chance 1/6): the suffix, (family, suffix), the suffix's
  length and token count, the name's length rank within the cluster (a name's length is its suffix's
  plus the cluster's constant, so the rank is all its length can tell), character 1-3-grams and tokens
  of the suffix, and all of them in one naive-Bayes score.
- `slate.*`, candidates the whole slate of 16 (chance 1/16): the same name features plus the size of the
  name's group on the slate. A slate lists the oracle's five lookalikes by design, so the one group of
  six gives the cluster away, and the bar a name-only predictor must not clear is the cluster-level
  chance, 1/6, not 1/16.
- `position.*`: the oracle's slate index (chance 1/16), its rank among its cluster in slate order, or the
  slate index of each cluster member (chance 1/6), alone or per family.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from skillgate_core.benchgen.choice_model import Choice
from skillgate_core.skills.aliases import lookalike_groups

__all__ = ["PREDICTORS", "AuditTask", "Predictor", "cluster_indices"]

Tokens = frozenset[Hashable]
Feature = Callable[["AuditTask", Sequence[int]], list[tuple[Hashable, ...]]]
"""(task, candidate slate indices) -> per candidate, its tokens."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class AuditTask:
    """What a predictor may look at: one task's slate names in prompt order, and (to score it) its oracle."""

    task_id: str
    """Task id."""
    split: str
    """Suite split (train, eval70_v1, slate147)."""
    family: str
    """Task family (the name's noun says it too)."""
    domain: str
    """Task domain (the cross-fitting folds of the training split)."""
    oracle: str
    """The oracle's name (one of `names`)."""
    names: tuple[str, ...]
    """The slate's 16 names, in prompt order (skills.json)."""


@dataclass(frozen=True)
class Predictor:
    """One shortcut model: which candidates it chooses among and which tokens it scores them by."""

    name: str
    """`name.*`, `slate.*` or `position.*`."""
    kind: Literal["name", "position"]
    """What it sees: the names alone or the positions alone."""
    candidates: Literal["cluster", "slate"]
    """The oracle's cluster (its six lookalike names) or the whole slate."""
    about: str
    """One line: what it scores."""
    features: tuple[Feature, ...]
    """Token makers; a candidate's tokens are all of theirs."""

    @property
    def bar(self) -> Literal["candidates", "cluster"]:
        """The chance the audit holds it to: a name over the whole slate reveals its cluster (module docstring)."""
        return "cluster" if self.kind == "name" and self.candidates == "slate" else "candidates"

    def candidate_indices(self, task: AuditTask) -> list[int]:
        return cluster_indices(task) if self.candidates == "cluster" else list(range(len(task.names)))

    def choice(self, task: AuditTask) -> Choice:
        """The task as this predictor sees it: its candidates' tokens and the oracle's index among them."""
        indices = self.candidate_indices(task)
        per_feature = [feature(task, indices) for feature in self.features]
        tokens = tuple(frozenset(t for made in per_feature for t in made[k]) for k in range(len(indices)))
        return Choice(candidates=tokens, answer=indices.index(task.names.index(task.oracle)))


def _group(name: str) -> str | None:
    """`<codename>-<noun>-` of a three-part name (lookalike_groups' key), else None."""
    parts = name.split("-", 2)
    return f"{parts[0]}-{parts[1]}-" if len(parts) == 3 else None


def _suffix(name: str) -> str:
    group = _group(name)
    return name[len(group):] if group else ""


def cluster_indices(task: AuditTask) -> list[int]:
    """Slate indices of the oracle's cluster (the names sharing its `<codename>-<noun>-`), in slate order."""
    group = _group(task.oracle)
    members = set(lookalike_groups(task.names).get(group or "", [task.oracle]))
    return [i for i, n in enumerate(task.names) if n in members]


# ---------------------------------------------------------------- name features (one token tuple per candidate)


def _each(make: Callable[[AuditTask, str], tuple[Hashable, ...]]) -> Feature:
    return lambda task, indices: [make(task, task.names[i]) for i in indices]


suffix = _each(lambda task, name: (("suffix", _suffix(name)),))
family_suffix = _each(lambda task, name: (("family_suffix", task.family, _suffix(name)),))
suffix_length = _each(lambda task, name: (("suffix_length", len(_suffix(name))),))
suffix_tokens = _each(lambda task, name: (("suffix_tokens", len(_suffix(name).split("-"))),))


def _ngrams(task: AuditTask, name: str) -> tuple[Hashable, ...]:
    text = f"^{_suffix(name)}$"
    grams = {text[i:i + n] for n in (1, 2, 3) for i in range(len(text) - n + 1)}
    return (*(("char", g) for g in sorted(grams)), *(("token", t) for t in sorted(set(_suffix(name).split("-")))))


suffix_ngrams = _each(_ngrams)


def length_rank(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    """The name's length rank among the candidates (0 = shortest; equal lengths share a rank): within a
    cluster, the suffix's length order, so it is whether the oracle tends to be the longest or shortest."""
    lengths = sorted({len(task.names[i]) for i in indices})
    return [(("length_rank", lengths.index(len(task.names[i]))),) for i in indices]


def _group_sizes(task: AuditTask, indices: Sequence[int]) -> list[int]:
    """How many slate names share each candidate's `<codename>-<noun>-` (six for the oracle's cluster; 1
    for a name of fewer than three parts)."""
    groups = lookalike_groups(task.names)
    return [len(groups.get(_group(task.names[i]) or "", [task.names[i]])) for i in indices]


def group_size(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    """The candidate's group size on the slate."""
    return [(("group_size", size),) for size in _group_sizes(task, indices)]


def group_suffix(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    """(group size on the slate, suffix) as one token."""
    return [(("group_suffix", size, _suffix(task.names[i])),)
            for size, i in zip(_group_sizes(task, indices), indices, strict=True)]


# ---------------------------------------------------------------- position features


def slate_index(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    return [(("index", i),) for i in indices]


def family_slate_index(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    return [(("family_index", task.family, i),) for i in indices]


def candidate_rank(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    """The candidate's rank among the candidates in slate order (for a cluster: 0 = its first member listed)."""
    return [(("rank", k),) for k in range(len(indices))]


def family_candidate_rank(task: AuditTask, indices: Sequence[int]) -> list[tuple[Hashable, ...]]:
    return [(("family_rank", task.family, k),) for k in range(len(indices))]


# ---------------------------------------------------------------- the predictors

_NAME_FEATURES = (suffix, family_suffix, suffix_length, suffix_tokens, length_rank, suffix_ngrams)

PREDICTORS: dict[str, Predictor] = {p.name: p for p in (
    Predictor("name.suffix", "name", "cluster", "the suffix", (suffix,)),
    Predictor("name.family_suffix", "name", "cluster", "(family, suffix)", (family_suffix,)),
    Predictor("name.suffix_length", "name", "cluster", "the suffix's length in characters", (suffix_length,)),
    Predictor("name.suffix_tokens", "name", "cluster", "the suffix's number of hyphen-separated tokens",
              (suffix_tokens,)),
    Predictor("name.length_rank", "name", "cluster", "the name's length rank within the cluster", (length_rank,)),
    Predictor("name.suffix_ngrams", "name", "cluster", "character 1-3-grams and tokens of the suffix",
              (suffix_ngrams,)),
    Predictor("name.naive_bayes", "name", "cluster", "every name.* feature above in one naive-Bayes score",
              _NAME_FEATURES),
    Predictor("slate.group_suffix", "name", "slate", "(the name's group size on the slate, its suffix)",
              (group_suffix,)),
    Predictor("slate.naive_bayes", "name", "slate",
              "group size, suffix, (family, suffix), suffix length and n-grams in one naive-Bayes score",
              (group_size, suffix, family_suffix, suffix_length, suffix_ngrams)),
    Predictor("position.slate_index", "position", "slate", "the slate index", (slate_index,)),
    Predictor("position.family_slate_index", "position", "slate", "(family, slate index)", (family_slate_index,)),
    Predictor("position.cluster_rank", "position", "cluster", "the rank within the cluster in slate order",
              (candidate_rank,)),
    Predictor("position.family_cluster_rank", "position", "cluster", "(family, rank within the cluster)",
              (family_candidate_rank,)),
    Predictor("position.cluster_index", "position", "cluster", "each cluster member's slate index", (slate_index,)),
)}
"""Every predictor the audit fits, by name."""

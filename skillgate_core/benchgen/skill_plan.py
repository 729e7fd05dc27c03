"""Which skills the suite holds: per (family, domain) cell, held-in and held-out oracle skills, each
with five lookalikes (one per misleading strategy), plus the general-purpose library.

Everything is a pure function of the config: the same seed plans the same skills in every process
(the suite's worker processes re-plan instead of receiving the skills).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from skillgate_core.benchgen.engines import tool_script
from skillgate_core.benchgen.families import FAMILIES, STRATEGIES, SkillDraft
from skillgate_core.benchgen.filler import FILLER_SKILLS, filler_body
from skillgate_core.benchgen.naming import cell_codenames, skill_name
from skillgate_core.benchgen.similarity import (
    MAX_MISLEADING_SIMILARITY,
    MIN_MISLEADING_SIMILARITY,
    description_similarity,
)
from skillgate_core.benchgen.stepped import procedure_codes, with_stepped_procedure
from skillgate_core.benchgen.suite_config import BenchBuildConfig

__all__ = ["GenerationError", "SkillEntry", "SkillSet", "library_skills", "plan_skills"]


class GenerationError(RuntimeError):
    """The generator could not produce something that meets its own checks; the message says what."""


# Declarations below, not logic: each field documented where it is declared (docs/design.md, Style).
@dataclass(frozen=True)
class SkillEntry:
    """One skill folder to write."""

    name: str
    """Skill name (= folder name)."""
    description: str
    """Front-matter description."""
    body: str
    """SKILL.md body."""
    scripts: tuple[tuple[str, str], ...]
    """(file name, text) under scripts/."""
    role: str
    """oracle, misleading or library."""
    strategy: str = ""
    """The misleading strategy (lookalikes only)."""
    codes: tuple[str, ...] = ()
    """The codes of its stepped procedure's steps, in order (bench-build procedure_steps; () for one
    script run)."""


@dataclass(frozen=True)
class SkillSet:
    """An oracle skill with its five lookalikes, and where it is used."""

    family: str
    """Family name."""
    domain: str
    """Domain name."""
    split: str
    """train (held-in), eval70_v1 or slate147 (held-out)."""
    codename: str
    """The house-tool codename the six names share."""
    draft: SkillDraft
    """The oracle's parameters and cue."""
    lookalike_drafts: tuple[SkillDraft, ...]
    """The lookalikes' drafts, in STRATEGIES order."""
    oracle: SkillEntry
    """The oracle skill."""
    lookalikes: tuple[SkillEntry, ...]
    """The five misleading skills, in STRATEGIES order."""
    similarities: tuple[float, ...]
    """description_similarity of each lookalike's description to the oracle's."""

    @property
    def misleading_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.lookalikes)


def _entry(draft: SkillDraft, name: str, template: int, role: str, codes: tuple[str, ...] = ()) -> SkillEntry:
    family = FAMILIES[draft.family]
    script = tool_script(draft.family, dict(draft.params), f"{name}: {family.structure} tool", steps=len(codes))
    body = family.body(draft, name)
    if codes:
        body = with_stepped_procedure(body, name, family.tool_file, draft.cue.output, codes)
    return SkillEntry(name=name, description=family.describe(draft, template), body=body,
                      scripts=((family.tool_file, script),), role=role, strategy=draft.strategy, codes=codes)


def _codes(tag: str, strategy: str, steps: int) -> tuple[str, ...]:
    """A skill's step codes, drawn from its own rng (its oracle's tag and its strategy), so lookalikes'
    codes differ from the oracle's and renaming a skill keeps them."""
    return procedure_codes(random.Random(f"steps:{tag}:{strategy or 'oracle'}"), steps) if steps else ()


def _skill_set(seed: int, family_name: str, domain: str, split: str, codename: str, steps: int = 0) -> SkillSet:
    family = FAMILIES[family_name]
    tag = f"{seed}:{family_name}:{domain}:{codename}"
    draft = family.sample(random.Random(f"skill:{tag}"), domain)
    looks = tuple(family.mutate(draft, s, random.Random(f"mutate:{tag}:{s}")) for s in STRATEGIES)
    # Suffixes and description templates are permuted per skill, so neither marks the oracle.
    perm = random.Random(f"names:{tag}")
    suffixes = perm.sample(family.suffixes, 6)
    templates = perm.sample(range(6), 6)
    noun = family.noun[domain]
    oracle = _entry(draft, skill_name(codename, noun, suffixes[0]), templates[0], "oracle", _codes(tag, "", steps))
    lookalikes = tuple(_entry(d, skill_name(codename, noun, suffixes[i + 1]), templates[i + 1], "misleading",
                              _codes(tag, d.strategy, steps))
                       for i, d in enumerate(looks))
    sims = tuple(description_similarity(oracle.description, look.description) for look in lookalikes)
    for look, sim in zip(lookalikes, sims, strict=True):
        if not MIN_MISLEADING_SIMILARITY <= sim <= MAX_MISLEADING_SIMILARITY:
            raise GenerationError(f"{look.name}: description similarity to {oracle.name} is {sim:.3f}, expected "
                                  f"{MIN_MISLEADING_SIMILARITY}..{MAX_MISLEADING_SIMILARITY}")
    return SkillSet(family_name, domain, split, codename, draft, looks, oracle, lookalikes, sims)


def plan_skills(config: BenchBuildConfig) -> list[SkillSet]:
    """Every oracle skill of the suite with its lookalikes, ordered by split, family, domain, codename."""
    counts = {"train": config.train_skills_per_cell, "eval70_v1": config.eval_skills_per_cell,
              "slate147": config.slate_skills_per_cell}
    sets: list[SkillSet] = []
    for family in config.families:
        for domain in config.domains:
            names = iter(cell_codenames(config.seed, family, domain, sum(counts.values())))
            for split, n in counts.items():
                sets.extend(_skill_set(config.seed, family, domain, split, next(names), config.procedure_steps)
                           for _ in range(n))
    order = {s: i for i, s in enumerate(counts)}
    return sorted(sets, key=lambda s: (order[s.split], config.families.index(s.family),
                                       config.domains.index(s.domain), s.oracle.name))


def library_skills() -> list[SkillEntry]:
    """The general-purpose skills every slate library holds."""
    return [SkillEntry(name=f.name, description=f.description, body=filler_body(f), scripts=(), role="library")
            for f in FILLER_SKILLS]

"""Which skills the suite holds: per (family, domain) cell, held-in and held-out oracle skills, each
with five lookalikes (one per misleading strategy), plus the general-purpose library.

The oracle's suffix and description template are dealt per (family, split) so that each of the six
marks the oracle equally often (balanced_draws); which lookalike gets which of the other five is a
per-skill seeded shuffle. Everything is a pure function of the config: the same seed plans the same
skills in every process.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from skillgate_core.benchgen.balanced_draws import balanced_deal
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

__all__ = ["TEMPLATES", "GenerationError", "SkillEntry", "SkillSet", "library_skills", "plan_skills"]

TEMPLATES = 6
"""Description templates per family (`Family.describe`'s index 0..5): the oracle's is dealt, the lookalikes
take the other five."""


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
    script = tool_script(family.engine, dict(draft.params), f"{name}: {family.structure} tool", steps=len(codes))
    body = family.body(draft, name)
    if codes:
        body = with_stepped_procedure(body, name, family.tool_file, draft.cue.output, codes)
    return SkillEntry(name=name, description=family.describe(draft, template), body=body,
                      scripts=((family.tool_file, script),), role=role, strategy=draft.strategy, codes=codes)


def _codes(tag: str, strategy: str, steps: int) -> tuple[str, ...]:
    """A skill's step codes, drawn from its own rng (its oracle's tag and its strategy), so lookalikes'
    codes differ from the oracle's and renaming a skill keeps them."""
    return procedure_codes(random.Random(f"steps:{tag}:{strategy or 'oracle'}"), steps) if steps else ()


def _skill_set(seed: int, family_name: str, domain: str, split: str, codename: str, oracle_suffix: int,
               oracle_template: int, steps: int = 0) -> SkillSet:
    """One oracle with its lookalikes; the oracle's suffix and template index are dealt (balanced_draws),
    the lookalikes take the other five of each in a per-skill seeded order."""
    family = FAMILIES[family_name]
    tag = f"{seed}:{family_name}:{domain}:{codename}"
    draft = family.sample(random.Random(f"skill:{tag}"), domain)
    looks = tuple(family.mutate(draft, s, random.Random(f"mutate:{tag}:{s}")) for s in STRATEGIES)
    perm = random.Random(f"names:{tag}")
    others = [s for i, s in enumerate(family.suffixes) if i != oracle_suffix]
    perm.shuffle(others)
    suffixes = [family.suffixes[oracle_suffix], *others]
    spare = [t for t in range(TEMPLATES) if t != oracle_template]
    perm.shuffle(spare)
    templates = [oracle_template, *spare]
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
        # each cell's codenames, split by split (a codename is unique within its cell, not across cells)
        names = {d: iter(cell_codenames(config.seed, family, d, sum(counts.values()))) for d in config.domains}
        cells = {(d, split): [next(names[d]) for _ in range(n)] for split, n in counts.items() for d in config.domains}
        for split in counts:
            sizes = [len(cells[(d, split)]) for d in config.domains]
            suffix_deal = balanced_deal(sizes, len(FAMILIES[family].suffixes),
                                        f"{config.seed}:oracle-suffix:{family}:{split}")
            template_deal = balanced_deal(sizes, TEMPLATES, f"{config.seed}:oracle-template:{family}:{split}")
            for c, domain in enumerate(config.domains):
                sets.extend(_skill_set(config.seed, family, domain, split, codename, suffix_deal[c][k],
                                       template_deal[c][k], config.procedure_steps)
                            for k, codename in enumerate(cells[(domain, split)]))
    order = {s: i for i, s in enumerate(counts)}
    return sorted(sets, key=lambda s: (order[s.split], config.families.index(s.family),
                                       config.domains.index(s.domain), s.oracle.name))


def library_skills() -> list[SkillEntry]:
    """The general-purpose skills every slate library holds."""
    return [SkillEntry(name=f.name, description=f.description, body=filler_body(f), scripts=(), role="library")
            for f in FILLER_SKILLS]

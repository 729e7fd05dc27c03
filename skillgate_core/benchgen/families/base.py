"""What every task family provides: a skill draft (parameters + context cue), five mutations, inputs,
instruction, description and SKILL.md body; plus the five misleading strategies.

A *skill* is a domain procedure (one parameter set of a family engine, e.g. one house ledger
format). Its *cue* is the context a task states openly (revision, consumer, input scope, output
path): the oracle's cue matches the instruction, each misleading lookalike differs in the one cue
that goes with its wrong detail, so a careful reader can tell them apart from the descriptions
while the decisive knowledge stays in the SKILL.md body.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "STRATEGIES",
    "STRATEGY_LABELS",
    "Cue",
    "Family",
    "SkillDraft",
    "pick",
    "with_cue",
]

STRATEGIES: tuple[str, ...] = ("wrong-command", "wrong-output", "wrong-order", "wrong-parameter", "wrong-scope")
"""The five misleading strategies (METHOD.md 8), one misleading skill each."""
STRATEGY_LABELS: dict[str, str] = {
    "wrong-command": "wrong command/API",
    "wrong-output": "wrong path/output contract",
    "wrong-order": "wrong order/validation",
    "wrong-parameter": "wrong parameter/decision rule",
    "wrong-scope": "wrong object/scope",
}
"""Human label of each strategy, as the method names them."""


@dataclass(frozen=True)
class Cue:
    """The openly stated context of a skill; the instruction repeats the oracle's."""

    revision: int
    """Revision of the house format / table / policy / runbook."""
    consumer: str
    """Who consumes the result (e.g. "month-end close")."""
    scope: str
    """Which inputs or objects it covers, in words."""
    output: str
    """The output path it writes."""


@dataclass(frozen=True)
class SkillDraft:
    """One skill before it is written: family, domain, engine parameters and context."""

    family: str
    """Family name (procedural, diagnosis, constraints, planning)."""
    domain: str
    """Domain name (data-formats, service-config, scheduling, deploy-runbooks)."""
    params: Mapping[str, Any]
    """Engine parameters (JSON-able)."""
    cue: Cue
    """Openly stated context."""
    consumers: tuple[str, ...] = ()
    """Other consumers of the domain, for the lookalikes' cues."""
    strategy: str = ""
    """Empty for an oracle; else the misleading strategy that produced it."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Family-specific words for the texts (format names, alternative scope, ...)."""


@dataclass(frozen=True)
class Family:
    """A reasoning structure: how its skills, lookalikes, inputs and texts are made."""

    name: str
    """Family name, also the engine name."""
    structure: str
    """The reasoning structure in words."""
    domains: tuple[str, ...]
    """Domains it covers."""
    noun: Mapping[str, str]
    """domain -> the noun in skill names (e.g. ledger)."""
    suffixes: tuple[str, ...]
    """Six name suffixes; each skill permutes them over its oracle and five lookalikes."""
    tool_file: str
    """File name of the skill's script under scripts/. SKILL.md procedures run it directly (it is
    executable, with a shebang), never as `python3 /skills/...`: an exec naming a reader command and
    a /skills/ path that is not a SKILL.md is a span mismatch (METHOD.md 4.3) and rejects the group."""
    sample: Callable[[random.Random, str], SkillDraft]
    """(rng, domain) -> an oracle draft."""
    mutate: Callable[[SkillDraft, str, random.Random], SkillDraft]
    """(oracle draft, strategy, rng) -> the lookalike with one decisive wrong detail."""
    inputs: Callable[[random.Random, SkillDraft], dict[str, str]]
    """(rng, oracle draft) -> the initial workspace {path: text}."""
    instruction: Callable[[random.Random, SkillDraft, Mapping[str, str]], str]
    """(rng, oracle draft, inputs) -> the task statement (never names the skill)."""
    describe: Callable[[SkillDraft, int], str]
    """(draft, template index 0..5) -> the description."""
    body: Callable[[SkillDraft, str], str]
    """(draft, skill name) -> the SKILL.md body, ending in the ```bash procedure."""
    naive: str
    """A python3 program: the no-skill agent's generic attempt (reads instruction.md from argv[1])."""


def pick(rng: random.Random, options, k: int | None = None):
    """rng.choice / rng.sample over a sorted copy, so the draw never depends on set order."""
    pool = sorted(options)
    return rng.choice(pool) if k is None else rng.sample(pool, k)


def with_cue(draft: SkillDraft, strategy: str, params: Mapping[str, Any], **cue: Any) -> SkillDraft:
    """The lookalike: `draft` with new params and some cue fields changed."""
    return replace(draft, params=params, cue=replace(draft.cue, **cue), strategy=strategy)

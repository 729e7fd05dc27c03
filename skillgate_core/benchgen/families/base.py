"""What every task family provides: a skill draft (parameters + context cue), five mutations, inputs,
instruction, description and SKILL.md body; plus the five misleading strategies.

A *skill* is a domain procedure (one parameter set of a family engine, e.g. one house ledger
format). Its *cue* is the context a task states openly (revision, consumer, input scope, output
path): the oracle's cue matches the instruction, each misleading lookalike differs in the one cue
that goes with its wrong detail, so a careful reader can tell them apart from the descriptions
while the decisive knowledge stays in the SKILL.md body.

A family module (procedural.py, ...) defines THEMES, TOOL_FILE, NAIVE and six functions, and ends
with `FAMILY = declare_family(globals(), ...)`. What every family does alike lives here: the
oracle's cue (`oracle_draft`), the one cue each misleading strategy changes (`lookalike`), a
wrong-output path (`other_file`) and order-independent draws (`pick`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

__all__ = [
    "STRATEGIES",
    "STRATEGY_LABELS",
    "Cue",
    "Family",
    "SkillDraft",
    "declare_family",
    "lookalike",
    "oracle_draft",
    "other_file",
    "pick",
    "procedure_section",
]

STRATEGIES: tuple[str, ...] = ("wrong-command", "wrong-output", "wrong-order", "wrong-parameter", "wrong-scope")
"""The five misleading strategies (docs/method.md 8), one misleading skill each."""
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
    a /skills/ path that is not a SKILL.md is a span mismatch (docs/method.md 4.3) and rejects the group."""
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
    engine: ModuleType
    """Its stdlib-only engine (benchgen/engines/<name>.py: `solve`, `check`), pasted into the skill's tool,
    the reference solution and the verifier (engines/embed.py)."""
    naive: str
    """A python3 program: the no-skill agent's generic attempt (reads instruction.md from argv[1]).
    Each is written alone into the sandbox, so the four repeat their few lines of instruction parsing
    on purpose (no shared helper can be imported there)."""


def pick(rng: random.Random, options, k: int | None = None):
    """rng.choice / rng.sample over a sorted copy, so the draw never depends on set order."""
    pool = sorted(options)
    return rng.choice(pool) if k is None else rng.sample(pool, k)


def oracle_draft(rng: random.Random, family: str, domain: str, params: Mapping[str, Any],
                 consumers: Iterable[str], scope: str, extra: Mapping[str, Any] | None = None) -> SkillDraft:
    """The oracle draft a family's `sample` ends with: its cue names one of the domain's `consumers`
    (shuffled; the others are left for the lookalikes' cues), a revision in 3..9, `scope`, and the
    output path params["output"]."""
    order = list(consumers)
    rng.shuffle(order)
    cue = Cue(revision=rng.randint(3, 9), consumer=order[0], scope=scope, output=params["output"])
    return SkillDraft(family, domain, params, cue, tuple(order[1:]), extra=extra if extra is not None else {})


def lookalike(draft: SkillDraft, strategy: str, params: Mapping[str, Any], scope: str = "") -> SkillDraft:
    """The misleading lookalike of the oracle `draft` for `strategy`: `params` carry its one wrong
    detail, and the cue changes in the one field that goes with that strategy: wrong-command an
    older revision, wrong-output the new params["output"], wrong-order and wrong-parameter the
    domain's next two consumers, wrong-scope `scope` (the family's words for the wrong scope)."""
    if strategy == "wrong-command":
        cue = replace(draft.cue, revision=draft.cue.revision - 1)
    elif strategy == "wrong-output":
        cue = replace(draft.cue, output=params["output"])
    elif strategy == "wrong-order":
        cue = replace(draft.cue, consumer=draft.consumers[0])
    elif strategy == "wrong-parameter":
        cue = replace(draft.cue, consumer=draft.consumers[1])
    elif strategy == "wrong-scope":
        cue = replace(draft.cue, scope=scope)
    else:
        raise ValueError(f"strategy: unknown {strategy!r}")
    return replace(draft, params=params, cue=cue, strategy=strategy)


def other_file(rng: random.Random, path: str, names: Iterable[str]) -> str:
    """`path` in the same folder under another of `names` (drawn with `pick`): a wrong-output path."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/{pick(rng, set(names) - {name})}"


def procedure_section(name: str, tool_file: str, check: str, note: str = "") -> str:
    """The SKILL.md `## Procedure` section every family ends its rules with: run the skill's script
    (directly: it is executable), then `check` the output; the ```bash block is what
    skills.extract_procedure finds and the follower agent runs. `note` opens the parenthesis."""
    return (f"## Procedure\n\nRun from the task's working directory ({note}python3 standard library only):\n\n"
            f"```bash\n/skills/{name}/scripts/{tool_file}\n{check}\n```\n")


_MODULE_PARTS = ("THEMES", "TOOL_FILE", "NAIVE", "sample", "mutate", "inputs", "instruction", "describe", "body")
"""What every family module defines, under these names (declare_family reads them)."""


def declare_family(module: Mapping[str, Any], *, engine: ModuleType, structure: str, noun: Mapping[str, str],
                   suffixes: tuple[str, ...]) -> Family:
    """The Family a family module declares at its end, `FAMILY = declare_family(globals(), ...)`: its
    name is the module's (and its `engine` module's), its domains the module's THEMES, and its tool file, no-skill program and
    generator functions the module's TOOL_FILE, NAIVE, sample, mutate, inputs, instruction, describe
    and body."""
    missing = [name for name in _MODULE_PARTS if name not in module]
    if missing:
        raise TypeError(f"{module.get('__name__')}: a family module defines {', '.join(missing)}")
    name = module["__name__"].rsplit(".", 1)[-1]
    # One name for the family, its engine and its tasks' `family` field: a mismatch would paste another
    # family's solver into this family's verifier.
    if engine.__name__.rsplit(".", 1)[-1] != name:
        raise TypeError(f"{module.get('__name__')}: engine {engine.__name__} is not benchgen/engines/{name}.py")
    return Family(
        name=name, structure=structure, domains=tuple(module["THEMES"]),
        noun=noun, suffixes=suffixes, tool_file=module["TOOL_FILE"], sample=module["sample"],
        mutate=module["mutate"], inputs=module["inputs"], instruction=module["instruction"],
        describe=module["describe"], body=module["body"], engine=engine, naive=module["NAIVE"],
    )

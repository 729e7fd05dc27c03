"""Which stages a run executes, and where each of their inputs comes from.

A recipe lists *entries*: a stage name ("grpo") or a labelled instance of one ("grpo:mixed-task-reward",
configured by its own table `["grpo:mixed-task-reward"]`), so one recipe can train two arms and
evaluate both. A run may select part of the recipe: `only` (these entries), `start` (from this entry
on), `until` (up to this entry); a name matches the entry of that name or every instance of that stage.

Each input role of each selected entry is wired by the first rule that applies:
  0. the recipe's [wiring] names its source, "ENTRY.ROLE": that earlier entry's output of another role
     (`"eval70:sft" = {policy_export = "sft.sft_model"}` evaluates the SFT policy itself; a source
     "stage:ENTRY#ROLE" in the plan);
  1. an earlier entry of the run produces it: the one with the consumer's label, else the unlabelled
     one (a stage that gathers the role, paper-tables' eval_rows, takes every producer);
  2. an explicit input: the recipe's [inputs] or `inputs.ROLE=PATH`;
  3. the newest completed output of that role on record (`finder.newest`, the warehouse in flows/);
  4. a stage that builds it is added to the run before its consumer (configured from the recipe's
     `upstream` recipe, else its defaults) -- not in an `only` run, and not for a role that an entry of
     the recipe which this run skips would produce (that one is the user's to name).
Whatever none of them provides is listed as missing, with what to do about it.

Pure: no warehouse, no Prefect; the finder is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from skillgate_core.base.config import ConfigError
from skillgate_core.base.suggestions import did_you_mean
from skillgate_core.pipeline.stages import UnknownStageError, get_stage, stage_names

__all__ = [
    "FoundInput",
    "check_wiring",
    "InputFinder",
    "PlannedStage",
    "Selection",
    "entry_label",
    "entry_stage",
    "plan_entries",
    "select_entries",
    "validate_entries",
]

_LABEL = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")


def entry_stage(entry: str) -> str:
    """The stage an entry runs: "grpo:mixed" -> "grpo"."""
    return entry.partition(":")[0]


def entry_label(entry: str) -> str:
    """The entry's label ("" for a plain stage entry)."""
    return entry.partition(":")[2]


def validate_entries(entries: Sequence[str], where: str) -> None:
    """Entries name known stages, labels are kebab-case, no entry twice, stages in pipeline order."""
    if not entries:
        raise ConfigError(f"{where}: recipe.stages: expected a non-empty list of stage names")
    for e in entries:
        try:
            get_stage(entry_stage(e))
        except UnknownStageError as exc:
            raise ConfigError(f"{where}: recipe.stages: {exc}") from None
        if ":" in e and not _LABEL.fullmatch(entry_label(e)):
            raise ConfigError(f"{where}: recipe.stages: '{e}': a label after ':' must be 1-48 characters of "
                              "[a-z0-9-], starting with a letter or digit")
    order = {s: i for i, s in enumerate(stage_names())}
    ranks = [order[entry_stage(e)] for e in entries]
    if ranks != sorted(ranks) or len(set(entries)) != len(entries):
        raise ConfigError(f"{where}: recipe.stages: entries must be unique and in pipeline order "
                          f"({', '.join(stage_names())}); label repeats of a stage as STAGE:LABEL")


@dataclass(frozen=True)
class Selection:
    """Which entries of a recipe a run executes (the CLI's --only/--from/--until)."""

    only: tuple[str, ...] = ()
    """Run only these entries (an entry name, or a stage name = all its instances)."""
    start: str = ""
    """Start at this entry (the first one matching); earlier entries are skipped."""
    until: str = ""
    """Stop after this entry (the last one matching); later entries are skipped."""

    def __bool__(self) -> bool:
        return bool(self.only or self.start or self.until)

    def describe(self) -> str:
        parts = ([f"--only {','.join(self.only)}"] if self.only else []) + \
                ([f"--from {self.start}"] if self.start else []) + ([f"--until {self.until}"] if self.until else [])
        return " ".join(parts)


def _matching(entries: Sequence[str], name: str, where: str) -> list[int]:
    hits = [i for i, e in enumerate(entries) if e == name or entry_stage(e) == name]
    if not hits:
        raise ConfigError(f"{where}: '{name}' is not a stage of this recipe{did_you_mean(name, entries)}; "
                          f"its stages: {', '.join(entries)}")
    return hits


def select_entries(entries: Sequence[str], selection: Selection, where: str = "command line") -> list[str]:
    """The entries `selection` keeps, in recipe order; ConfigError naming `where` for an unknown name."""
    keep = list(range(len(entries)))
    if selection.only:
        chosen = {i for name in selection.only for i in _matching(entries, name, f"{where}: --only")}
        keep = [i for i in keep if i in chosen]
    if selection.start:
        first = _matching(entries, selection.start, f"{where}: --from")[0]
        keep = [i for i in keep if i >= first]
    if selection.until:
        last = _matching(entries, selection.until, f"{where}: --until")[-1]
        keep = [i for i in keep if i <= last]
    if not keep:
        raise ConfigError(f"{where}: {selection.describe()} selects no stage of this recipe ({', '.join(entries)})")
    return [entries[i] for i in keep]


@dataclass(frozen=True)
class FoundInput:
    """An input found on record instead of produced in this run."""

    path: str
    """Where the content is."""
    description: str
    """Where it came from, for the plan ("collect run 3f2a9c… of 2026-11-30 17:02")."""


class InputFinder(Protocol):
    """Looks up existing outputs (the warehouse implements it in flows/; tests may pass their own)."""

    def newest(self, role: str) -> FoundInput | None:
        """The newest completed output of `role` whose content still exists, or None."""
        ...

    def lookup(self, role: str, reference: str) -> FoundInput:
        """The content of `role` that `reference` names (an id, a digest, a unique prefix of one);
        raises LookupError saying why when it names nothing usable for that role."""
        ...


@dataclass(frozen=True)
class PlannedStage:
    """One entry of a run's plan."""

    stage: str
    """Stage name (the registry's)."""
    built: bool
    """Whether the stage's code exists."""
    inputs: Mapping[str, str]
    """Input role -> where it comes from, as shown: "stage:ENTRY", a path, or "stage:A + stage:B"."""
    missing: tuple[str, ...]
    """Input roles nothing provides."""
    note: str
    """Why it cannot run, when it cannot (and what to do)."""
    entry: str = ""
    """The recipe entry ("grpo" or "grpo:LABEL"); equals `stage` for a plain entry."""
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Input role -> its sources: "stage:ENTRY" (an earlier entry's output) or a path; several for a
    role the stage gathers."""
    found: Mapping[str, str] = field(default_factory=dict)
    """Input role -> description, for inputs found on record (rule 3)."""
    added_for: str = ""
    """Non-empty for an entry the run added to build a missing input: "ROLE for ENTRY"."""


def check_wiring(wiring: Mapping[str, Mapping[str, str]], entries: Sequence[str], where: str) -> None:
    """Rule 0's table: each wired entry is in the recipe, each role one of its stage's inputs, each source
    "ENTRY.ROLE" an earlier entry and one of that stage's outputs; ConfigError naming the key otherwise."""
    for entry, roles in wiring.items():
        if entry not in entries:
            raise ConfigError(f"{where}: wiring.{entry}: not an entry of recipe.stages ({', '.join(entries)})")
        if not isinstance(roles, Mapping):
            raise ConfigError(f"{where}: wiring.{entry}: expected a table of role = \"ENTRY.ROLE\"")
        consumer = get_stage(entry_stage(entry))
        for role, src in roles.items():
            key = f"wiring.{entry}.{role}"
            if role not in consumer.inputs:
                raise ConfigError(f"{where}: {key}: stage '{consumer.name}' takes {', '.join(consumer.inputs)}, "
                                  f"not '{role}'")
            source_entry, dot, source_role = src.partition(".") if isinstance(src, str) else ("", "", "")
            if not dot or source_entry not in entries[: entries.index(entry)]:
                raise ConfigError(f"{where}: {key}: expected \"ENTRY.ROLE\" naming an entry listed before "
                                  f"'{entry}', got {src!r}")
            outputs = get_stage(entry_stage(source_entry)).outputs
            if source_role not in outputs:
                raise ConfigError(f"{where}: {key}: '{source_entry}' produces {', '.join(outputs)}, not "
                                  f"'{source_role}'")


def _gathers(stage: str) -> tuple[str, ...]:
    return get_stage(stage).gathers


def _choose_producer(role: str, consumer: str, producers: Sequence[str]) -> tuple[str, ...]:
    """Rule 1: which earlier entries feed `role` of `consumer` (empty: none decides it)."""
    if role in _gathers(entry_stage(consumer)):
        return tuple(producers)
    label = entry_label(consumer)
    for want in ([label] if label else []) + [""]:
        same = [p for p in producers if entry_label(p) == want]
        if same:
            return (same[-1],)
    return (producers[-1],) if len(producers) == 1 else ()


def _auto_producer(role: str, upstream_entries: Sequence[str]) -> tuple[str | None, str]:
    """Rule 4: the stage to add for `role` (None + why not)."""
    from_upstream = [e for e in upstream_entries if not entry_label(e) and role in get_stage(e).outputs]
    if from_upstream:
        return from_upstream[-1], ""
    makers = [s for s in stage_names() if role in get_stage(s).outputs and get_stage(s).built]
    if len(makers) == 1:
        return makers[0], ""
    return None, f"several stages produce {role} ({', '.join(makers)})" if makers else f"no stage produces {role}"


def plan_entries(
    entries: Sequence[str],
    selection: Selection,
    explicit: Mapping[str, str],
    *,
    finder: InputFinder | None = None,
    upstream_entries: Sequence[str] = (),
    build_missing: bool = False,
    where: str = "command line",
    wiring: Mapping[str, Mapping[str, str]] | None = None,
) -> list[PlannedStage]:
    """The run's plan (module docstring): selected entries, plus added producers, in a runnable order.

    build_missing: apply rule 4 (add stages that build missing inputs); off, they are listed as missing.
    wiring: rule 0, entry -> {input role: "ENTRY.OUTPUT_ROLE"} (checked by `check_wiring`).
    """
    wiring = wiring or {}
    selected = select_entries(entries, selection, where)
    skipped_producers = {r: e for e in entries if e not in selected for r in get_stage(entry_stage(e)).outputs}
    may_add = build_missing and not selection.only
    produced: dict[str, list[str]] = {}
    plan: list[PlannedStage] = []
    planned: set[str] = set()

    def wire(entry: str, added_for: str) -> None:
        spec = get_stage(entry_stage(entry))
        shown: dict[str, str] = {}
        sources: dict[str, tuple[str, ...]] = {}
        found: dict[str, str] = {}
        missing: list[str] = []
        notes: list[str] = []
        for role in spec.inputs:
            if role in wiring.get(entry, {}):
                source_entry, _, source_role = wiring[entry][role].partition(".")
                if source_entry in planned:
                    sources[role] = (f"stage:{source_entry}#{source_role}",)
                else:
                    missing.append(role)
                    notes.append(f"{role}: wired to {wiring[entry][role]}, whose entry this run does not run "
                                 f"({selection.describe()}): give inputs.{role}=PATH|ID")
                continue
            chosen = _choose_producer(role, entry, produced.get(role, []))
            if chosen:
                sources[role] = tuple(f"stage:{p}" for p in chosen)
            elif produced.get(role):
                missing.append(role)
                notes.append(f"{role}: several entries produce it ({', '.join(produced[role])}); give this entry "
                             "the label of the one it should read")
            elif role in explicit:
                if not Path(explicit[role]).expanduser().exists():
                    missing.append(role)
                    shown[role] = f"{explicit[role]} (does not exist)"
                    continue
                sources[role] = (explicit[role],)
            elif finder is not None and (hit := finder.newest(role)) is not None:
                sources[role], found[role] = (hit.path,), hit.description
            elif role in skipped_producers:
                missing.append(role)
                notes.append(f"{role}: produced by '{skipped_producers[role]}', which this run skips "
                             f"({selection.describe()}), and none is on record: give inputs.{role}=PATH|ID")
            elif may_add:
                maker, why = _auto_producer(role, upstream_entries)
                if maker is None or maker in planned:
                    missing.append(role)
                    notes.append(f"{role}: {why or 'cannot be built here'}: give inputs.{role}=PATH|ID")
                    continue
                wire(maker, f"{role} for {entry}")
                sources[role] = (f"stage:{maker}",)
            elif selection.only:
                missing.append(role)
                notes.append(f"{role}: none on record: give inputs.{role}=PATH|ID (or run without --only)")
            else:
                missing.append(role)
        for role, srcs in sources.items():
            shown[role] = " + ".join(srcs)
        shown = {r: shown[r] for r in spec.inputs if r in shown}
        note = "" if spec.built else f"not built yet ({spec.planned_in})"
        if missing and not note:
            note = "missing inputs: " + ", ".join(missing) + ("; " + "; ".join(notes) if notes else "")
        plan.append(PlannedStage(stage=spec.name, built=spec.built, inputs=shown, missing=tuple(missing),
                                 note=note, entry=entry, sources=sources, found=found, added_for=added_for))
        planned.add(entry)
        for role in spec.outputs:
            produced.setdefault(role, []).append(entry)

    for entry in selected:
        wire(entry, "")
    return plan

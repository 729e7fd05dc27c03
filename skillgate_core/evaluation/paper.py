"""The paper build (docs/method.md 9): every table and figure, rebuilt from raw rows only.

    build_paper(Path("evals"), Path("paper"), PaperConfig(), training_dirs=[Path("runs")])

reads every eval_trials.parquet under `evals/` (several evaluations = several methods) and every
training metrics.jsonl / credit_episodes.jsonl under `evals/` and the training dirs, and writes

    paper/report.md                      every table (markdown) with its figures linked
    paper/paper.json                     every number: inputs (sha256), config, metrics, tables, bootstrap,
                                         claim check
    paper/tables/SECTION/KEY.md, .tex    one file per table and format
    paper/figures/SECTION/KEY.png        one file per figure

SECTION is a protocol name (`eval70_v1__mixed__r4`; rows of several protocols give several sections,
never one mixed table) or `training`. The build is deterministic: the same rows give the same bytes
(no timestamps, no absolute paths, sorted inputs, a seeded bootstrap). A table whose rows carry two
fingerprints refuses (ProtocolMismatchError), before any file is written.

Seeds: an arm's rows are labelled PROFILE[+VARIANT...][@sN] (evaluation/arm_label.py, seed 0 bare).
Each method is compared with the baseline at its own seed (X@s1 - mixed_task_reward@s1; `sft` with
seed 0's), and an arm with rows at two or more seeds that the baseline has too also with those seeds
pooled (table paired_bootstrap_pooled_seeds, evaluation/seed_pairs.py). When SkillGate shares two or
more seeds with the baseline, the claim check is made on them pooled, each seed's own check listed
under it; with one seed it is made on seed 0's comparison.

As a stage (`paper-tables`): input role eval_rows (a folder), output role report (this folder).
CLI: `skillgate paper build ROWS_DIR [--training DIR] --out DIR`. The build is written into a temp folder
beside DIR and renamed into place whole: a killed build leaves DIR as it was, and its temp folder is
removed by the next build.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillgate_core.base.atomic import TMP_PREFIX, atomic_write_text, building_dir, stale_builds
from skillgate_core.base.config import config_to_dict
from skillgate_core.base.digests import file_sha256
from skillgate_core.base.stage_output import StageOutput
from skillgate_core.evaluation import figures
from skillgate_core.evaluation.arm_label import parse_arm_label, seed_label
from skillgate_core.evaluation.bootstrap import (
    PairedBootstrap,
    TaskSetMismatchError,
    paired_bootstrap,
    pooled_paired_bootstrap,
)
from skillgate_core.evaluation.claim import claim_check
from skillgate_core.evaluation.metrics import Trial, summarize_trials
from skillgate_core.evaluation.paper_config import PaperConfig
from skillgate_core.evaluation.probe import PROBE_SUMMARY_FILE, read_probe_summaries
from skillgate_core.evaluation.rows import MethodTrials, eval_files, group_by_protocol, read_eval_rows
from skillgate_core.evaluation.seed_pairs import PooledArm, arm_seeds, pooled_arms, seed_pairs
from skillgate_core.evaluation.tables import (
    Table,
    ablation_table,
    behaviour_cost_table,
    bootstrap_table,
    check_comparable,
    credit_starvation_bins,
    credit_starvation_table,
    main_results_table,
    method_bootstrap_table,
    pooled_bootstrap_table,
    premise_table,
    read_strata,
    read_strata_table,
    selector_tradeoff_table,
    to_latex,
    to_markdown,
    training_summary_table,
)

__all__ = [
    "CREDIT_EPISODES_FILE",
    "CREDIT_EPISODE_KEYS",
    "METRICS_FILE",
    "PaperBuild",
    "PaperConfig",
    "PaperOutputError",
    "PassAtKError",
    "TrainingData",
    "build_paper",
    "build_paper_tables",
    "read_training",
]

METRICS_FILE = "metrics.jsonl"
CREDIT_EPISODES_FILE = "credit_episodes.jsonl"
CREDIT_EPISODE_KEYS = ("step", "response_tokens", "loss_tokens", "read_call_tokens", "identity_tokens",
                       "oracle_actions", "oracle_negative_actions", "profile")
"""One row of credit_episodes.jsonl: one trained episode."""
TRAINING_SECTION = "training"
POOLED_TABLE = "paired_bootstrap_pooled_seeds"
"""Key of the seeds-pooled bootstrap table (present when some compared arm has rows at two or more seeds)."""


class PaperOutputError(ValueError):
    """The output folder holds something that is not an earlier paper build."""


class PassAtKError(ValueError):
    """pass@k asked of rows with fewer than k trials of some task (e.g. k = 4 on a 1-repeat evaluation)."""


@dataclass(frozen=True)
class TrainingData:
    """Training-side inputs: metrics.jsonl runs and credit_episodes.jsonl episodes."""

    runs: list[tuple[str, str, list[dict[str, Any]]]]
    """(profile, source file, its metrics rows of that profile), sorted."""
    episodes: list[dict[str, Any]]
    """Every credit_episodes.jsonl row."""
    files: list[dict[str, Any]]
    """{source, kind, sha256, rows} per file read."""


def _jsonl(path: Path, required: Sequence[str]) -> list[dict[str, Any]] | None:
    """The file's rows; None when no row has any of `required` (a file of that name with other content,
    e.g. an evaluation's own metrics.jsonl: it is listed as ignored); a row missing some of them raises."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not any(k in row for row in rows for k in required):
        return None
    for i, row in enumerate(rows, 1):
        missing = [k for k in required if k not in row]
        if missing:
            raise ValueError(f"{path} row {i}: missing key(s) {', '.join(missing)}")
    return rows


def training_run_label(row: Mapping[str, Any], path: Path) -> str:
    """The arm a training row belongs to, as the eval rows label it: its folder's name when that is an arm label
    of the row's profile and variant (the driver's training/<label>/: the only place a seed is written; a
    credit_episodes.jsonl row has no variant key, so its folder's is taken), else the profile with its labelled
    variant (PROFILE+VARIANT). So two seeds or a variant of one profile stay separate rows in the training tables."""
    profile, variant = str(row["profile"]), str(row.get("variant") or "")
    folder = parse_arm_label(path.parent.name)
    if folder.profile == profile and ("variant" not in row or "+".join(folder.variants) == variant):
        return folder.label
    return "+".join(x for x in (profile, variant) if x)


def read_training(dirs: Sequence[Path]) -> TrainingData:
    """Every metrics.jsonl and credit_episodes.jsonl under `dirs` (each file once, sources relative to its dir)."""
    seen: set[Path] = set()
    found: list[tuple[str, str, Path]] = []
    for root in dirs:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: training folder does not exist")
        for name in (METRICS_FILE, CREDIT_EPISODES_FILE):
            for path in sorted(root.rglob(name)):
                if path.resolve() not in seen:
                    seen.add(path.resolve())
                    found.append((name, path.relative_to(root).as_posix(), path))
    runs: list[tuple[str, str, list[dict[str, Any]]]] = []
    episodes: list[dict[str, Any]] = []
    files = []
    for name, source, path in sorted(found, key=lambda f: (f[0], f[1])):
        rows = _jsonl(path, ("step", "profile") if name == METRICS_FILE else CREDIT_EPISODE_KEYS)
        if rows is None:
            files.append({"source": source, "kind": name, "sha256": file_sha256(path), "rows": 0,
                          "ignored": "no training rows (no step/profile keys)"})
            continue
        if name == METRICS_FILE:
            by_profile: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in rows:
                by_profile[training_run_label(r, path)].append(r)
            runs += [(p, source, sorted(rs, key=lambda r: int(r["step"]))) for p, rs in sorted(by_profile.items())]
        else:
            episodes += [{**r, "profile": training_run_label(r, path)} for r in rows]
        files.append({"source": source, "kind": name, "sha256": file_sha256(path), "rows": len(rows)})
    return TrainingData(runs=sorted(runs, key=lambda r: (r[0], r[1])), episodes=episodes, files=files)


@dataclass
class _Section:
    """One section of the report: its tables and the figures to draw (drawn only after every table built)."""

    name: str
    heading: str
    intro: list[str]
    tables: list[Table] = field(default_factory=list)
    figures: dict[str, Callable[[Path], dict[str, Any]]] = field(default_factory=dict)
    """figure key -> draw(path); placed after the table of the same key (or at the end)."""
    after: dict[str, str] = field(default_factory=dict)
    """figure key -> table key it follows."""
    notes: dict[str, list[str]] = field(default_factory=dict)
    """table key -> report lines placed after the table and its figures (the report only, not the table files)."""
    data: dict[str, Any] = field(default_factory=dict)


def _bootstrap(method: MethodTrials, baseline: MethodTrials, config: PaperConfig, seed: int,
               benchmark: str | None = None) -> PairedBootstrap:
    """`method` - `baseline` (both at training seed `seed`) on all tasks, or on one benchmark's; the config's
    resamples, seed and confidence."""
    def trials(m: MethodTrials) -> list[Trial]:
        return [t for t in m.trials if benchmark is None or t.benchmark == benchmark]

    return paired_bootstrap(
        trials(method), trials(baseline), method_label=method.method, baseline_label=baseline.method,
        method_fingerprint=method.fingerprint, baseline_fingerprint=baseline.fingerprint, k=config.k,
        resamples=config.bootstrap_resamples, seed=config.bootstrap_seed, confidence=config.confidence,
        arm_seeds=(seed,))


def _pooled_bootstrap(arm: PooledArm, config: PaperConfig) -> PairedBootstrap:
    """`arm` - the baseline over all tasks, the trials of their shared seeds pooled."""
    return pooled_paired_bootstrap(
        {s: m.trials for s, m in zip(arm.seeds, arm.methods, strict=True)},
        {s: b.trials for s, b in zip(arm.seeds, arm.baselines, strict=True)},
        method_label=arm.arm, baseline_label=arm.baseline_arm, method_fingerprint=arm.methods[0].fingerprint,
        baseline_fingerprint=arm.baselines[0].fingerprint, k=config.k, resamples=config.bootstrap_resamples,
        seed=config.bootstrap_seed, confidence=config.confidence)


@dataclass(frozen=True)
class _Comparisons:
    """Every paired bootstrap of one protocol against the baseline: per seed, and with seeds pooled."""

    baseline_rows: bool
    """Whether the baseline has rows at any seed (without, no comparison at all)."""
    per_seed: dict[str, PairedBootstrap]
    """method label -> its comparison with the baseline at its seed, in the table's order."""
    skipped: dict[str, str]
    """method label -> why it has no per-seed comparison."""
    arms: list[PooledArm]
    """Every compared arm with rows at two or more seeds."""
    pooled: dict[str, PairedBootstrap]
    """arm -> its comparison with the baseline, their shared seeds pooled."""
    pooled_skipped: dict[str, str]
    """arm -> why it has no pooled comparison."""


def _comparisons(methods: Sequence[MethodTrials], config: PaperConfig) -> _Comparisons:
    """Each method against the baseline at its own seed (X@s1 - baseline@s1; `sft` and other seedless labels
    against seed 0), and each arm with two or more seeds shared with the baseline, those seeds pooled. A
    comparison that cannot be made (no baseline rows at that seed, other tasks) is skipped with its reason:
    one incomplete arm leaves the others' comparisons standing."""
    per_seed, skipped = {}, {}
    for pair in seed_pairs(methods, config.method, config.baseline):
        label = pair.method.method
        if pair.baseline is None:
            skipped[label] = f"no rows for the baseline at seed {pair.seed} ({pair.baseline_label})"
            continue
        try:
            per_seed[label] = _bootstrap(pair.method, pair.baseline, config, pair.seed)
        except TaskSetMismatchError as exc:
            skipped[label] = str(exc)
    arms = pooled_arms(methods, config.method, config.baseline)
    pooled, pooled_skipped = {}, {}
    for arm in arms:
        if not arm.poolable:
            shared = ", ".join(map(str, arm.seeds)) or "none"
            pooled_skipped[arm.arm] = (f"rows at seeds {', '.join(map(str, arm.method_seeds))}, of which the baseline "
                                       f"has {shared}: fewer than 2 seeds to pool")
            continue
        try:
            pooled[arm.arm] = _pooled_bootstrap(arm, config)
        except TaskSetMismatchError as exc:
            pooled_skipped[arm.arm] = str(exc)
    baseline_arm = parse_arm_label(config.baseline).arm
    return _Comparisons(baseline_rows=baseline_arm in arm_seeds(methods), per_seed=per_seed, skipped=skipped,
                        arms=arms, pooled=pooled, pooled_skipped=pooled_skipped)


def _bootstraps(methods: Sequence[MethodTrials], config: PaperConfig,
                comparisons: _Comparisons) -> list[tuple[str, PairedBootstrap]]:
    """SkillGate - baseline (seed 0, the bare labels) over all tasks, then per benchmark; the all-tasks one is
    the seed-0 comparison `_comparisons` already made, when it could make it."""
    by = {m.method: m for m in methods}
    a, b = by[config.method], by[config.baseline]
    overall = comparisons.per_seed.get(config.method) or _bootstrap(a, b, config, 0)
    benches = sorted({t.benchmark for t in a.trials})
    return [("all", overall)] + [(bench, _bootstrap(a, b, config, 0, bench)) for bench in benches]


def _pooled_claim_arm(comparisons: _Comparisons, config: PaperConfig) -> PooledArm | None:
    """SkillGate's arm when it shares two or more seeds with the baseline (the claim is then made pooled)."""
    skillgate = parse_arm_label(config.method).arm
    return next((a for a in comparisons.arms if a.arm == skillgate and a.poolable), None)


def _add_skillgate_bootstrap(section: _Section, methods: Sequence[MethodTrials], config: PaperConfig,
                             comparisons: _Comparisons) -> None:
    """The SkillGate - baseline table (seed 0) and figure; the claim check read off its all-tasks intervals,
    unless SkillGate shares two or more seeds with the baseline (then `_add_pooled_claim` makes it)."""
    pooled_arm = _pooled_claim_arm(comparisons, config)
    pointer = ([f"**Claim check**: made on seeds {', '.join(map(str, pooled_arm.seeds))} pooled (below the "
                "seeds-pooled bootstrap); this table is seed 0's."] if pooled_arm else [])
    missing = sorted({config.method, config.baseline} - {m.method for m in methods})
    if missing:
        reason = f"no rows for method(s) {', '.join(missing)}"
        section.data["bootstrap"] = {"skipped": reason}
        table = bootstrap_table([])
        section.tables.append(Table(table.key, table.title, table.caption + f" Skipped: {reason}.",
                                    table.columns, (), []))
        if pooled_arm is None:
            section.data["claim_check"] = {"skipped": reason}
            section.notes[table.key] = [f"**Claim check**: not made ({reason})."]
        else:
            section.notes[table.key] = pointer
        return
    results = _bootstraps(methods, config, comparisons)
    section.tables.append(bootstrap_table(results))
    overall = results[0][1]
    section.figures["paired_bootstrap"] = lambda p: figures.bootstrap_figure(overall, p, config.dpi)
    section.after["paired_bootstrap"] = "paired_bootstrap"
    section.data["bootstrap"] = {"skipped": None}
    if pooled_arm is not None:
        section.notes["paired_bootstrap"] = pointer
        return
    check = claim_check(overall)
    section.data["claim_check"] = {"skipped": None, **check.to_json()}
    section.notes["paired_bootstrap"] = [check.line()]


def _add_pooled_bootstraps(section: _Section, comparisons: _Comparisons, config: PaperConfig) -> None:
    """The seeds-pooled table and figure (only when some compared arm has rows at two or more seeds), and the
    claim check on SkillGate's pooled seeds under it."""
    if not comparisons.arms:
        section.data["pooled_seeds"] = {"skipped": "no compared arm has rows at two or more seeds", "arms": {}}
        return
    baseline = parse_arm_label(config.baseline).arm
    results = list(comparisons.pooled.values())
    table = pooled_bootstrap_table(baseline, results, comparisons.pooled_skipped)
    section.tables.append(table)
    section.data["pooled_seeds"] = {"skipped": None, "arms": {a.arm: list(a.seeds) for a in comparisons.arms
                                                              if a.arm in comparisons.pooled}}
    if results:
        section.figures[table.key] = lambda p: figures.method_bootstrap_figure(
            results, p, config.dpi, heading=f"every arm - {baseline}, seeds pooled")
        section.after[table.key] = table.key
    if (arm := _pooled_claim_arm(comparisons, config)) is not None:
        _add_pooled_claim(section, arm, comparisons)


def _add_pooled_claim(section: _Section, arm: PooledArm, comparisons: _Comparisons) -> None:
    """The claim check on SkillGate's seeds pooled, then each pooled seed's own check (listed, not the verdict)."""
    seeds = ", ".join(map(str, arm.seeds))
    per_seed, lines = [], []
    for seed in arm.seeds:
        label = seed_label(arm.arm, seed)
        result = comparisons.per_seed.get(label)
        if result is None:
            why = comparisons.skipped[label]
            per_seed.append({"seed": seed, "skipped": why})
            lines.append(f"- Seed {seed} check: not made ({why}).")
            continue
        check = claim_check(result)
        per_seed.append({"seed": seed, "skipped": None, **check.to_json()})
        lines.append("- " + check.line(title=f"Seed {seed} check"))
    per_seed_notes = ["Each pooled seed on its own (its arm against the baseline at that seed):", "", *lines]
    result = comparisons.pooled.get(arm.arm)
    if result is None:
        reason = f"seeds {seeds} pooled: {comparisons.pooled_skipped[arm.arm]}"
        section.data["claim_check"] = {"skipped": reason, "pooled_seeds": list(arm.seeds), "per_seed": per_seed}
        section.notes[POOLED_TABLE] = [f"**Claim check**: not made ({reason}).", "", *per_seed_notes]
        return
    check = claim_check(result)
    section.data["claim_check"] = {"skipped": None, "pooled_seeds": list(arm.seeds), **check.to_json(),
                                   "per_seed": per_seed}
    section.notes[POOLED_TABLE] = [check.line(), "", *per_seed_notes]


def _add_method_bootstraps(section: _Section, comparisons: _Comparisons, config: PaperConfig) -> None:
    """Every method with rows - the baseline at its seed, all tasks (table and figure); skipped as a whole
    without baseline rows at any seed, per method without them at its seed or when its task set differs."""
    if not comparisons.baseline_rows:
        table = method_bootstrap_table(config.baseline, [], {})
        section.tables.append(Table(table.key, table.title, table.caption + f" Skipped: no rows for method "
                                    f"{config.baseline}.", table.columns, (), table.data))
        return
    results = list(comparisons.per_seed.values())
    table = method_bootstrap_table(config.baseline, results, comparisons.skipped)
    section.tables.append(table)
    if results:
        section.figures[table.key] = lambda p: figures.method_bootstrap_figure(results, p, config.dpi)
        section.after[table.key] = table.key


def _pass_k(name: str, methods: Sequence[MethodTrials], config: PaperConfig, auto_k: bool) -> tuple[int, str]:
    """The k of this protocol's pass@k and bootstrap, and the note when it is not config.k.

    pass@k needs >= k trials of every task. Rows with fewer (a 1-repeat demo evaluation) get, with
    `auto_k`, k = the fewest trials per task and a note saying so; without it (k set explicitly, or the
    paper-tables stage, whose k is part of its config digest) a PassAtKError naming the fix."""
    per_task = [(n, m.method, task) for m in methods for task, n in Counter(t.task_id for t in m.trials).items()]
    fewest, method, task = min(per_task, default=(config.k, "", ""))
    if fewest >= config.k:
        return config.k, ""
    if auto_k:
        return fewest, (f"pass@k uses k = {fewest}: these rows hold {fewest} trial{'s' if fewest > 1 else ''} per "
                        f"task, fewer than the default k = {config.k} (set k= to choose; k = {config.k} needs "
                        f"{config.k} repeats).")
    raise PassAtKError(f"protocol {name}: pass@{config.k} needs >= {config.k} trials per task; method {method} "
                       f"has {fewest} of task {task}: build with k={fewest}, or evaluate with >= {config.k} repeats")


def _protocol_section(name: str, methods: list[MethodTrials], config: PaperConfig,
                      probes: Mapping[tuple[str, str], Mapping[str, Any]], auto_k: bool = False) -> _Section:
    k, k_note = _pass_k(name, methods, config, auto_k)
    config = replace(config, k=k)
    main = main_results_table(methods, config.k, probes or None)  # the first table: refuses two fingerprints, naming both
    fingerprint = check_comparable(methods, main.key)
    ids = sorted({p for m in methods for p in m.protocol_ids})
    intro = [f"Protocol `{', '.join(ids)}`, fingerprint `{fingerprint}`.", "",
             "| method | trials | tasks | experiments | rows from |", "|---|---:|---:|---|---|"]
    intro += [f"| {m.method} | {len(m.trials)} | {len({t.task_id for t in m.trials})} | "
              f"{', '.join(m.experiments) or '-'} | {', '.join(m.sources)} |" for m in methods]
    if k_note:
        intro += ["", f"Note: {k_note}"]
    section = _Section(name=name, heading=f"Protocol {name}", intro=intro,
                       data={"k": k, "k_note": k_note or None})
    section.tables.append(main)
    section.figures["main_results"] = lambda p: figures.main_results_figure(
        [{"method": x["method"], "by_benchmark": x["by_benchmark"]} for x in main.data], config.k, p, config.dpi)
    section.after["main_results"] = "main_results"

    comparisons = _comparisons(methods, config)
    _add_skillgate_bootstrap(section, methods, config, comparisons)
    _add_pooled_bootstraps(section, comparisons, config)
    _add_method_bootstraps(section, comparisons, config)
    section.tables.append(ablation_table(methods, config.ablation_methods, config.k))
    tradeoff = selector_tradeoff_table(methods)
    section.tables.append(tradeoff)
    section.figures["selector_tradeoff"] = lambda p: figures.selector_tradeoff_figure(tradeoff.data, p, config.dpi)
    section.after["selector_tradeoff"] = "selector_tradeoff"
    section.tables.append(read_strata_table(methods, config.max_strata))
    strata = read_strata(methods, config.max_strata)
    section.figures["read_strata"] = lambda p: figures.read_strata_figure(strata, p, config.dpi)
    section.after["read_strata"] = "read_strata"
    section.tables.append(behaviour_cost_table(methods))
    section.tables.append(premise_table(methods))
    section.data["protocol_ids"] = ids
    section.data["fingerprint"] = fingerprint
    section.data["methods"] = {
        m.method: {"experiments": list(m.experiments), "exports": list(m.exports), "sources": list(m.sources),
                   "metrics": summarize_trials(m.trials, ks=sorted({1, config.k}))}
        for m in methods
    }
    return section


def _training_section(training: TrainingData, config: PaperConfig) -> _Section | None:
    if not training.runs and not training.episodes:
        return None
    section = _Section(name=TRAINING_SECTION, heading="Training",
                       intro=["Training files: " + ", ".join(f"`{f['source']}`" + (" (ignored: not training rows)"
                                                                               if f.get("ignored") else "")
                                                            for f in training.files) + "."])
    if training.runs:
        section.tables.append(training_summary_table(training.runs, config.training_window))
        section.figures["training_selection"] = lambda p: figures.training_selection_figure(training.runs, p,
                                                                                            config.dpi)
        section.after["training_selection"] = "training_summary"
    if training.episodes:
        section.tables.append(credit_starvation_table(training.episodes, config.length_bin_edges))
        bins = credit_starvation_bins(training.episodes, config.length_bin_edges)
        section.figures["credit_starvation"] = lambda p: figures.credit_starvation_figure(bins, p, config.dpi)
        section.after["credit_starvation"] = "credit_starvation"
    return section


def _check_out(out: Path) -> None:
    """`out` may be new, empty or an earlier paper build (replaced whole); anything else is refused. The
    temp folders of builds killed earlier (SIGKILL) beside it are removed: they never block a build."""
    if out.exists() and not (out.is_dir() and (not any(out.iterdir()) or (out / "paper.json").is_file())):
        raise PaperOutputError(f"{out}: not empty and not an earlier paper build (no paper.json); choose an "
                               "empty or new folder")
    for stale in stale_builds(out.parent):
        if stale.name.startswith(f"{TMP_PREFIX}{out.name}-"):
            shutil.rmtree(stale, ignore_errors=True)


@dataclass(frozen=True)
class PaperBuild:
    """What `build_paper` wrote (paths relative to `out`) and a few headline numbers."""

    out: Path
    tables: tuple[str, ...]
    figures: tuple[str, ...]
    metrics: Mapping[str, Any]


def build_paper(rows_dir: Path, out: Path, config: PaperConfig = PaperConfig(),
                training_dirs: Sequence[Path] = (), *, auto_k: bool = False) -> PaperBuild:
    """Build every table and figure from the eval rows under `rows_dir` (+ training files); see the module doc.
    auto_k: a protocol whose rows hold fewer than config.k trials of a task uses that fewer k, with a note
    (the CLI's default when k is not given); otherwise such rows raise PassAtKError."""
    rows_dir, out = Path(rows_dir), Path(out)
    _, left_out = eval_files(rows_dir, config.exclude_tags)  # tagged re-runs (nightlies) the config leaves out
    rows = read_eval_rows(rows_dir, config.exclude_tags)
    training = read_training([rows_dir if rows_dir.is_dir() else rows_dir.parent, *training_dirs])
    probes = read_probe_summaries(rows_dir)
    sections = [_protocol_section(name, methods, config, probes, auto_k)
                for name, methods in group_by_protocol(rows).items()]
    training_section = _training_section(training, config)
    if training_section:
        sections.append(training_section)

    _check_out(out)  # only now: a refused comparison leaves the output folder as it was
    # built in a temp folder beside `out`, renamed into place whole: a build killed midway leaves `out` as it
    # was (an earlier build stays readable) and its temp folder is removed by the next build
    with building_dir(out, replace=True) as tmp:
        return _write_paper(rows, rows_dir, training, sections, config, out, tmp, left_out)


def _write_paper(rows: list[dict[str, Any]], rows_dir: Path, training: TrainingData, sections: list[_Section],
                 config: PaperConfig, out: Path, tmp: Path, left_out: list[tuple[str, str]]) -> PaperBuild:
    """Every file of the build into `tmp` (published as `out` by build_paper); what was written."""
    eval_files: defaultdict[str, int] = defaultdict(int)
    for r in rows:
        eval_files[r["source"]] += 1
    root = rows_dir if rows_dir.is_dir() else rows_dir.parent
    doc: dict[str, Any] = {
        "schema": "skillgate-paper/1",
        "config": config_to_dict(config),
        "inputs": {"eval_rows": [{"source": s, "sha256": file_sha256(root / s), "rows": n}
                                 for s, n in sorted(eval_files.items())],
                   "probes": [{"source": str(p.relative_to(root)), "sha256": file_sha256(p)}
                              for p in sorted(root.rglob(PROBE_SUMMARY_FILE)) if p.is_file() and not p.is_symlink()],
                   "training": training.files,
                   "left_out": [{"source": s, "tag": t} for s, t in left_out]},
        "protocols": {},
        "training": None,
    }
    report = ["# SkillGate: paper tables and figures", "",
              "Rebuilt from raw evaluation rows and training metrics only (`skillgate paper build`); every "
              "number is also in `paper.json`.", ""]
    written_tables, written_figures = [], []
    for section in sections:
        report += [f"## {section.heading}", "", *section.intro, ""]
        table_data, figure_data = {}, {}
        drawn: dict[str, list[str]] = defaultdict(list)
        for key, draw in section.figures.items():
            rel = f"figures/{section.name}/{key}.png"
            info = draw(tmp / rel)
            figure_data[key] = {"file": rel, **info}
            drawn[section.after.get(key, "")].append(f"![{info['title']}]({rel})")
            written_figures.append(rel)
        for table in section.tables:
            for ext, render in (("md", to_markdown), ("tex", to_latex)):
                rel = f"tables/{section.name}/{table.key}.{ext}"
                atomic_write_text(tmp / rel, render(table))
                written_tables.append(rel)
            table_data[table.key] = {"title": table.title, "columns": list(table.columns),
                                     "rows": [list(r) for r in table.rows], "data": table.data}
            report += [to_markdown(table), *drawn.pop(table.key, []), ""]
            if notes := section.notes.get(table.key):
                report += [*notes, ""]
        for links in drawn.values():
            report += [*links, ""]
        entry = {**section.data, "tables": table_data, "figures": figure_data}
        if section.name == TRAINING_SECTION:
            doc["training"] = entry
        else:
            doc["protocols"][section.name] = entry
    atomic_write_text(tmp / "report.md", "\n".join(report).rstrip("\n") + "\n")
    atomic_write_text(tmp / "paper.json", json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n")
    metrics: dict[str, Any] = {
        "protocols": sorted(doc["protocols"]),
        "methods": sorted({m for p in doc["protocols"].values() for m in p["methods"]}),
        "trials": len(rows),
        "tables": len(written_tables) // 2,
        "figures": len(written_figures),
        "training_files": len(training.files),
        "left_out": [f"{s} (tag {t})" for s, t in left_out],
    }
    if k_notes := {n: p["k_note"] for n, p in sorted(doc["protocols"].items()) if p.get("k_note")}:
        metrics["k_notes"] = k_notes  # only from auto_k (the CLI): the stage's metrics never carry one
    for name, p in doc["protocols"].items():
        boot = p["tables"].get("paired_bootstrap", {}).get("data") or []
        for interval in (boot[0]["intervals"] if boot else []):
            metrics[f"{name}/{interval['statistic']}_difference"] = interval["difference"]
            metrics[f"{name}/{interval['statistic']}_ci"] = [interval["ci_low"], interval["ci_high"]]
        if "holds" in p.get("claim_check", {}):
            metrics[f"{name}/claim_holds"] = p["claim_check"]["holds"]
        if seeds := p.get("claim_check", {}).get("pooled_seeds"):
            # the claim was made on SkillGate's seeds pooled: its pooled differences beside the seed-0 ones
            metrics[f"{name}/claim_seeds"] = seeds
            skillgate = parse_arm_label(config.method).arm
            for c in p["tables"][POOLED_TABLE]["data"]["comparisons"]:
                for interval in c["intervals"] if c["method"] == skillgate else ():
                    metrics[f"{name}/pooled_{interval['statistic']}_difference"] = interval["difference"]
                    metrics[f"{name}/pooled_{interval['statistic']}_ci"] = [interval["ci_low"], interval["ci_high"]]
    return PaperBuild(out=out, tables=tuple(written_tables), figures=tuple(written_figures), metrics=metrics)


def build_paper_tables(config: PaperConfig, inputs: Mapping[str, Path], out_dir: Path) -> StageOutput:
    """Stage `paper-tables`: eval_rows (a folder of evaluations, training files allowed inside) -> report/."""
    report = Path(out_dir) / "report"
    built = build_paper(Path(inputs["eval_rows"]), report, config)
    return StageOutput(outputs={"report": report}, metrics=dict(built.metrics))

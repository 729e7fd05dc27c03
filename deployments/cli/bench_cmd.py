"""`skillgate bench build [--seed N] [--gate none|sample|all] [KEY=VALUE...]`, `skillgate bench stats [DIR]` and
`skillgate bench audit [--bench DIR] [--json]`.

build: write the bundled suite (4 families x 4 domains; training tasks on held-in skills, eval70_v1
and the 147-task slate on held-out skills) to DIR (default SKILLGATE_HOME/datasets/bench/seed-N),
with progress on stderr (writing, then the validity gate); print the digest, the counts and the gate
summary. KEY=VALUE overrides any BenchBuildConfig field (e.g. train_tasks_per_skill=2). Exit 1 if the
shortcut audit fails (bench/audit.json says why) or a gated task is not valid.
stats: tasks per family / domain / split, skills per split, audit and gate results of a built suite.
audit: the shortcut audit of a built suite (benchgen.audit): name-only and position-only predictors
fitted on its training tasks, their accuracy on every split against chance; exit 1 if one fails. It
prints; it never rewrites the suite's audit.json.
skillgym: turn real skills into task packages with the builder/reviewer loop against any
OpenAI-compatible endpoint (accepted/, unresolved/ with reasons, records.jsonl with tokens and cost).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

console = Console()
_GATES = ("none", "sample", "all")


def _default_dir(seed: int) -> Path:
    from skillgate_core.base.paths import state_layout

    return state_layout().datasets / "bench" / f"seed-{seed}"


def _count_table(title: str, counts: dict[str, dict[str, int]]) -> Table:
    table = Table(title=title)
    splits = sorted({s for row in counts.values() for s in row}, key=["train", "eval70_v1", "slate147"].index)
    for col in ("", *splits, "total"):
        table.add_column(col, justify="left" if not col else "right")
    for key, row in counts.items():
        table.add_row(key, *(str(row.get(s, 0)) for s in splits), str(sum(row.values())))
    return table


def _gate_table(gate: dict) -> Table:
    table = Table(title=f"validity gate ({gate['mode']})")
    for col in ("", "gated", "valid", "invalid", "error"):
        table.add_column(col, justify="left" if not col else "right")
    rows = [("all", gate["overall"]), *gate["by_family"].items(), *gate["by_split"].items()]
    for key, c in rows:
        style = "green" if c["valid"] == c["gated"] else "bold red"
        table.add_row(key, str(c["gated"]), f"[{style}]{c['valid']}[/]", str(c["invalid"]), str(c["error"]))
    return table


def _audit_table(report: dict) -> Table:
    splits = list(report["splits"])
    table = Table(title=f"shortcut audit (fitted on {report['fitted_on']}; accuracy / chance, tasks)")
    for col in ("predictor", *(f"{s} ({report['splits'][s]['tasks']})" for s in splits)):
        table.add_column(col, justify="left" if col == "predictor" else "right")
    for name, predictor in report["predictors"].items():
        cells = []
        for s in splits:
            r = predictor["splits"][s]
            style = "" if r["passed"] else "bold red"
            cell = f"{r['accuracy']:.3f} / {r['bar']:.3f}"
            cells.append(f"[{style}]{cell}[/]" if style else cell)
        table.add_row(name, *cells)
    return table


def _bench_folder(bench: Path | None) -> Path:
    folder = bench or (_default_dir(0) / "bench")
    return folder / "bench" if (folder / "bench" / "tasks.jsonl").is_file() else folder


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(help="The bundled benchmark suite: build it, show what it holds.", no_args_is_help=True)

    @bench_app.command("build")
    def build(
        overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE...]", help="BenchBuildConfig overrides"),
        seed: int = typer.Option(0, "--seed", help="suite seed: the same seed writes a byte-identical suite"),
        gate: str = typer.Option("none", "--gate", help="validity gate after writing: none, sample or all"),
        out: Path = typer.Option(None, "--out", help="suite folder (default: SKILLGATE_HOME/datasets/bench/seed-N)"),
        workers: int = typer.Option(0, "--workers", min=0, help="writer processes (0: one per core, up to 4)"),
    ) -> None:
        """Generate the suite: skills, task packages, slates; optionally gate them."""
        from rich.markup import escape

        from deployments.cli.progress import phase_progress
        from skillgate_core.base.config import config_from_mapping, parse_override
        from skillgate_core.benchgen.audit import AuditError
        from skillgate_core.benchgen.stage import build_bench
        from skillgate_core.benchgen.stats import suite_stats
        from skillgate_core.benchgen.suite_config import BenchBuildConfig

        if gate not in _GATES:
            raise typer.BadParameter(f"expected one of {', '.join(_GATES)}, got {gate!r}", param_hint="--gate")
        values = dict(parse_override(o) for o in overrides or [])
        values.update(seed=seed, gate=gate)
        config = config_from_mapping(BenchBuildConfig, values, "command line")
        target = out or _default_dir(seed)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with phase_progress(("writing task packages", "tasks"), ("validity gate", "tasks")) as (writing, gating):
                result = build_bench(config, {}, target, workers=workers or None, progress=writing,
                                     gate_progress=gating)
        except AuditError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}\nreport: {target / 'bench' / 'audit.json'}",
                          highlight=False)
            raise typer.Exit(1) from None
        bench = result.outputs["bench"]
        stats = suite_stats(bench)
        console.print(_count_table("tasks per family", stats["tasks_by_family"]))
        console.print(f"suite {bench}\n{result.metrics['tasks']} tasks, {result.metrics['skills']} skills\n"
                      f"digest {result.metrics['digest']}\nshortcut audit: passed (largest excess over chance "
                      f"{result.metrics['audit']['max_excess']:+.3f}; skillgate bench audit --bench {bench})",
                      highlight=False)
        if stats["gate"]:
            console.print(_gate_table(stats["gate"]))
            if stats["gate"]["overall"]["valid"] != stats["gate"]["overall"]["gated"]:
                raise typer.Exit(1)

    @bench_app.command("stats")
    def stats(
        bench: Path = typer.Argument(None, metavar="[DIR]", help="a built suite (default: seed 0 in the state dir)"),
        digest: bool = typer.Option(False, "--digest", help="also recompute the suite digest (reads every file)"),
    ) -> None:
        """Tasks per family / domain / split, skills per split, gate results."""
        from skillgate_core.benchgen.stats import suite_stats

        folder = _bench_folder(bench)
        s = suite_stats(folder, with_digest=digest)
        console.print(f"suite {folder} (seed {s['seed']}): {s['tasks']} tasks", highlight=False)
        console.print(_count_table("tasks per family", s["tasks_by_family"]))
        console.print(_count_table("tasks per domain", s["tasks_by_domain"]))
        sk = s["skills"]
        console.print(f"oracle skills per split: {sk['oracle_by_split']}; lookalikes {sk['misleading']}, "
                      f"library {sk['library']}, total {sk['total']}; held-out disjoint from training: "
                      f"{s['held_out_disjoint']}", highlight=False)
        sim = s["description_similarity"]
        console.print(f"lookalike description similarity: max {sim['observed_max']}, mean {sim['observed_mean']} "
                      f"(allowed <= {sim['max_allowed']})", highlight=False)
        if s["audit"]:
            verdict = "passed" if s["audit"]["passed"] else f"FAILED ({len(s['audit']['failures'])} checks)"
            console.print(f"shortcut audit: {verdict} (skillgate bench audit --bench {folder})", highlight=False)
        else:
            console.print("shortcut audit: no audit.json (skillgate bench audit)")
        if s["gate"]:
            console.print(_gate_table(s["gate"]))
        else:
            console.print("validity gate: not run (skillgate bench build --gate sample|all)")
        if digest:
            console.print(f"digest {s['digest']}", highlight=False)

    @bench_app.command("audit")
    def audit(
        bench: Path = typer.Option(None, "--bench", help="a built suite (default: seed 0 in the state dir)"),
        as_json: bool = typer.Option(False, "--json", help="print the whole report as JSON (audit.json's content)"),
    ) -> None:
        """Shortcut audit: can names alone, or slate positions alone, find the oracle better than chance?"""
        import json

        from rich.markup import escape

        from skillgate_core.benchgen.audit import audit_bench, audit_settings

        folder = _bench_folder(bench)
        margin, alpha = audit_settings(folder)
        report = audit_bench(folder, margin, alpha)
        if as_json:
            print(json.dumps(report, indent=2, sort_keys=True))
        else:
            console.print(f"suite {folder} (digest {report['suite_digest'][:12]})", highlight=False)
            console.print(_audit_table(report))
            console.print(f"rule: {report['rule']}; margin {margin}, alpha {alpha}; units: skills (name), tasks "
                          "(position); slate.* predictors are held to the cluster-level chance; train is "
                          "cross-fitted by domain", highlight=False)
            spread = max((b["spread"] for families in report["suffix_balance"].values() for b in families.values()),
                         default=0)
            console.print(f"oracle suffixes per family and split: skill counts differ by at most {spread}",
                          highlight=False)
            for line in report["failures"]:
                console.print(f"[bold red]fail:[/] {escape(line)}", highlight=False)
            console.print("passed" if report["passed"] else "[bold red]FAILED[/]")
        if not report["passed"]:
            raise typer.Exit(1)

    @bench_app.command("skillgym")
    def skillgym(
        skills: list[Path] = typer.Argument(..., metavar="SKILL_DIR...", help="skill folders (each with SKILL.md)"),
        base_url: str = typer.Option(..., "--base-url", help="OpenAI-compatible API root, e.g. http://host:8000/v1"),
        model: str = typer.Option(..., "--model", help="model name"),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="environment variable with the key: OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY"),
        out: Path = typer.Option(Path("skillgym-out"), "--out", help="output folder"),
        structure: list[str] = typer.Option(None, "--structure", help="restrict to these structures (repeatable)"),
        max_repairs: int = typer.Option(5, "--max-repairs", min=0, help="repair rounds after the first build"),
        price_in: float = typer.Option(0.0, "--price-in", help="USD per million prompt tokens"),
        price_out: float = typer.Option(0.0, "--price-out", help="USD per million completion tokens"),
        backend: str = typer.Option("bwrap", "--backend", help="validity-gate sandbox backend"),
    ) -> None:
        """Builder/reviewer generation: fit-check, build, validity gate, quality review, repairs."""
        import os

        from skillgate_core.benchgen.skillgym import (
            STRUCTURES,
            ChatClient,
            SkillGymConfig,
            generate_from_skill,
        )
        from skillgate_core.envs.backends import BACKENDS, is_backend
        from skillgate_core.policy.endpoint_keys import check_api_key_env, check_key_destination

        if not is_backend(backend):
            raise typer.BadParameter(f"expected one of {', '.join(BACKENDS)}, got {backend!r}", param_hint="--backend")
        config = SkillGymConfig(structures=tuple(structure or STRUCTURES), max_repairs=max_repairs,
                                price_in_per_mtok=price_in, price_out_per_mtok=price_out, gate_backend=backend)
        try:
            check_api_key_env(api_key_env, "--api-key-env")
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--api-key-env") from None
        try:  # the key goes only to the base URLs listed beside it (docs/deploy.md, "Endpoint keys")
            check_key_destination(api_key_env, base_url, "endpoint")
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--base-url") from None
        client = ChatClient(base_url=base_url, model=model, api_key=os.environ.get(api_key_env, ""))
        table = Table(title=f"SkillGym generation -> {out}")
        for col in ("skill", "structure", "verdict", "rounds", "tokens in/out", "cost $", "reason"):
            table.add_column(col)
        for folder in skills:
            for r in generate_from_skill(folder, client, out, config):
                style = {"accepted": "green", "skipped": "yellow"}.get(r.verdict, "bold red")
                table.add_row(r.skill, r.structure, f"[{style}]{r.verdict}[/]", str(r.rounds),
                              f"{r.prompt_tokens}/{r.completion_tokens}", f"{r.cost_usd:.4f}", r.reason[:120])
        console.print(table)

    app.add_typer(bench_app, name="bench")

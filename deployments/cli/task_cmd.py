"""`skillgate task check PATH...`, `skillgate task import HARBOR_DIR DEST`, `skillgate task gc`.

check: the validity gate on every task package under the PATHs (a package folder, or a folder of
them): progress on stderr while it runs, then one row per task (valid / which gate failed / flaky /
error) and exit 0 only if every task is valid. import: copy Harbor / Terminal-Bench tasks into SkillGate packages, one row per task with
what was changed and what to check by hand; exit 1 if any failed. gc: remove sandboxes whose
owning process is gone (and, with --images, task images built on an older base image); every run
(check, episodes, collect) also does this first, so gc is only needed to clean up without a run.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()


def register(app: typer.Typer) -> None:
    task_app = typer.Typer(help="Task packages (Harbor layout): validity gate, Harbor import, sandbox cleanup.",
                           no_args_is_help=True)

    @task_app.command("check")
    def check(
        paths: list[Path] = typer.Argument(..., metavar="PATH...", help="task package folders, or folders of them"),
        backend: str = typer.Option("auto", help="sandbox backend: auto or a registered one (an unknown name lists them)"),
        repeats: int = typer.Option(2, min=1, help="episodes per agent (nop, oracle); disagreement = flaky"),
        jobs: int = typer.Option(2, min=1, help="tasks checked at the same time"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object per task instead of a table"),
    ) -> None:
        """Validity gate: nop agent scores 0 and oracle (solve.sh) scores 1, each REPEATS times."""
        from skillgate_core.envs.backends import BACKENDS, is_backend
        from skillgate_core.envs.validity_gate import check_tasks, find_task_dirs

        if not is_backend(backend):
            raise typer.BadParameter(f"expected one of {', '.join(BACKENDS)}, got {backend!r}", param_hint="--backend")
        if not find_task_dirs(paths):
            console.print(f"[bold red]no task.toml found under {escape(' '.join(map(str, paths)))}[/]")
            raise typer.Exit(1)
        from deployments.cli.progress import phase_progress

        with phase_progress(("validity gate", "tasks")) as (progress,):  # seconds per task: minutes for a suite
            reports = check_tasks(paths, backend=backend, repeats=repeats, jobs=jobs, progress=progress)
        if as_json:
            for r in reports:
                print(json.dumps({"task": r.task_id, "path": r.path, "backend": r.backend, "valid": r.valid,
                                  "verdict": r.verdict, "failed": list(r.failed), "flaky": r.flaky, "error": r.error,
                                  "nop": r.scores("nop"), "oracle": r.scores("oracle")}))
        else:
            table = Table(title=f"validity gate ({repeats} runs per agent)")
            for col in ("task", "backend", "verdict", "nop", "oracle", "detail"):
                table.add_column(col)
            for r in reports:
                style = "green" if r.valid else "bold red"
                failing = [t.detail for t in r.trials
                           if (t.agent == "nop" and t.score > 0) or (t.agent == "oracle" and t.score < 1)]
                detail = r.error or "; ".join(dict.fromkeys(failing))
                table.add_row(escape(r.task_id or r.path), r.backend or "-", f"[{style}]{escape(r.verdict)}[/]",
                              _scores(r.scores("nop")), _scores(r.scores("oracle")), escape(detail[:200]))
            console.print(table)
            n_valid = sum(r.valid for r in reports)
            console.print(f"{n_valid}/{len(reports)} valid")
        if not all(r.valid for r in reports):
            raise typer.Exit(1)

    @task_app.command("import")
    def import_(
        harbor_dir: Path = typer.Argument(..., metavar="HARBOR_DIR", help="a Harbor task folder or a dataset folder"),
        dest: Path = typer.Argument(..., metavar="DEST", help="where the packages go (DEST/<task id>/)"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace packages that already exist in DEST"),
    ) -> None:
        """Import Harbor / Terminal-Bench tasks as SkillGate task packages."""
        from skillgate_core.envs.backend_registry import SANDBOX_BACKENDS, USABLE_BACKENDS
        from skillgate_core.envs.harbor_import import import_harbor

        try:
            reports = import_harbor(harbor_dir, dest, overwrite=overwrite)
        except FileNotFoundError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from exc
        table = Table(title=f"import {harbor_dir} -> {dest}")
        for col in ("task", "status", "backends", "notes"):
            table.add_column(col)
        for r in reports:
            status = "[green]ok[/]" if r.ok else f"[bold red]failed[/]: {escape(r.error)}"
            runs_it = [b for b in USABLE_BACKENDS if not r.needs_docker or SANDBOX_BACKENDS[b].runs_docker_only_tasks]
            backends = ", ".join(runs_it) + ("" if not r.needs_docker else " only: " + "; ".join(r.needs_docker))
            table.add_row(escape(r.task_id or r.source), status, escape(backends if r.ok else "-"),
                          escape("\n".join(r.notes)))
        console.print(table)
        if not all(r.ok for r in reports):
            raise typer.Exit(1)

    @task_app.command("gc")
    def gc(images: bool = typer.Option(False, "--images", help="also remove task images built on an older base")) -> None:
        """Remove sandboxes (bubblewrap sessions, Docker containers) whose owning process is gone."""
        from skillgate_core.envs.backends import cleanup_orphans

        removed = cleanup_orphans()
        console.print("removed " + ", ".join(f"{n} orphaned {name} sandbox(es)" for name, n in removed.items()))
        if images:
            from skillgate_core.envs import docker_sandbox
            from skillgate_core.envs.docker_images import prune_task_images

            if docker_sandbox.unavailable_reason():
                console.print("docker unavailable: no images pruned")
            else:
                console.print(f"removed {prune_task_images()} stale task image tag(s)")

    app.add_typer(task_app, name="task")


def _scores(values: list[float]) -> str:
    return " ".join(f"{v:g}" for v in values) or "-"
